package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd starts a single-member etcd on the given client and peer URLs and serves until a
// SIGTERM or SIGINT.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dir := fs.String("data-dir", "", "data folder")
	client := fs.String("listen-client-url", "", "client URL, e.g. http://127.0.0.1:17600")
	peer := fs.String("listen-peer-url", "", "peer URL, e.g. http://127.0.0.1:17601")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || *client == "" || *peer == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --listen-client-url and --listen-peer-url are required")
		return 2
	}
	cu, err := url.Parse(*client)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad client URL: %v\n", err)
		return 2
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: bad peer URL: %v\n", err)
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = "kubeplane"
	cfg.Dir = *dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// A test plane: losing the last writes on a power cut is acceptable, the fsync cost on a
	// shared disk is not.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	fmt.Fprintln(os.Stderr, "etcd: ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		return 1
	}
}
