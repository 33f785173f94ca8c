package main

import (
	_ "time/tzdata" // CronJob time zones, as the upstream mains link it

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// The three Kubernetes components, exactly as their upstream mains run them.

func runAPIServer(_ []string) int { return cli.Run(apiserver.NewAPIServerCommand()) }

func runControllerManager(_ []string) int {
	return cli.Run(controllermanager.NewControllerManagerCommand())
}

func runScheduler(_ []string) int { return cli.Run(scheduler.NewSchedulerCommand()) }
