// Command kubeplane is the local Kubernetes control plane of dispatch's tests in one binary: the
// first argument names the component (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok, the egress proxy) or a tool (kubectl, pki, yaml2json), and the rest
// are its own flags. Each component runs as a process of its own; linking them together
// builds the shared Kubernetes packages once.
package main

import (
	"fmt"
	"os"
)

// components maps a subcommand to the function that runs it with the remaining arguments.
var components = map[string]func(args []string) int{
	"etcd":                    runEtcd,
	"kube-apiserver":          runAPIServer,
	"kube-controller-manager": runControllerManager,
	"kube-scheduler":          runScheduler,
	"kwok":                    runKwok,
	"kubectl":                 runKubectl,
	"proxy":                   runProxy,
	"pki":                     runPKI,
	"yaml2json":               runYAML2JSON,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubeplane etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kwok|proxy|kubectl|pki|yaml2json [flags]")
		os.Exit(2)
	}
	run, ok := components[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "kubeplane: unknown component %q\n", os.Args[1])
		os.Exit(2)
	}
	// Each component parses os.Args itself: give it the arguments as its own binary would see them.
	os.Args = append([]string{os.Args[1]}, os.Args[2:]...)
	os.Exit(run(os.Args[1:]))
}
