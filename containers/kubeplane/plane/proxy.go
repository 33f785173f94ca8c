package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// routeFlag collects --route SERVICE_IP:PORT=127.0.0.1:PORT pairs.
type routeFlag map[string]string

func (r routeFlag) String() string { return fmt.Sprint(map[string]string(r)) }

func (r routeFlag) Set(v string) error {
	from, to, ok := strings.Cut(v, "=")
	if !ok || from == "" || to == "" {
		return fmt.Errorf("route %q is not FROM=TO", v)
	}
	host, _, err := net.SplitHostPort(to)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("route %q: the target must be a loopback address with a port", v)
	}
	r[from] = to
	return nil
}

// runProxy is the API server's egress for the "cluster" network: an HTTP CONNECT proxy on a
// Unix socket that maps the cluster IP of each controller's webhook Service to the port on
// 127.0.0.1 where that controller serves, so webhooks are called by their Service (and their certificates checked
// against the Service's name) with no cluster network. Any other destination is refused: the
// plane never sends traffic anywhere but the loopback.
func runProxy(args []string) int {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	socket := fs.String("socket", "", "the Unix socket to listen on")
	routes := routeFlag{}
	fs.Var(routes, "route", "SERVICE_IP:PORT=127.0.0.1:PORT (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *socket == "" {
		fmt.Fprintln(os.Stderr, "proxy: --socket is required")
		return 2
	}
	var mu sync.Mutex
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodConnect {
			http.Error(w, "only CONNECT is served", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		target, ok := routes[req.Host]
		mu.Unlock()
		if !ok {
			fmt.Fprintf(os.Stderr, "proxy: refused CONNECT %s (no route)\n", req.Host)
			http.Error(w, "no route to "+req.Host, http.StatusForbidden)
			return
		}
		upstream, err := net.DialTimeout("tcp", target, 5*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			upstream.Close()
			http.Error(w, "cannot hijack", http.StatusInternalServerError)
			return
		}
		client, buf, err := hj.Hijack()
		if err != nil {
			upstream.Close()
			return
		}
		if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			client.Close()
			upstream.Close()
			return
		}
		go splice(upstream, buf, client)
		go splice(client, upstream, upstream)
	})
	// The API server reaches an HTTP CONNECT proxy over TCP only with TLS and a client
	// certificate; over a Unix socket it needs neither, and only root reaches this one.
	_ = os.Remove(*socket)
	listener, err := net.Listen("unix", *socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		return 1
	}
	if err := os.Chmod(*socket, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		return 1
	}
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "proxy: listening on %s with %d routes\n", *socket, len(routes))
	if err := server.Serve(listener); err != nil {
		fmt.Fprintf(os.Stderr, "proxy: %v\n", err)
		return 1
	}
	return 0
}

// splice copies src into dst and closes closer when src ends.
func splice(dst io.Writer, src io.Reader, closer io.Closer) {
	_, _ = io.Copy(dst, src)
	_ = closer.Close()
}
