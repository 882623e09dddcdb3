// Command muster-scheduler is the stock kube-scheduler with the MusterGang
// plugin registered. Before the command starts it asks the cluster whether it
// serves native PodGroups and, if so, turns on the GenericWorkload feature gate
// so the in-tree GangScheduling plugin handles pods with spec.schedulingGroup.
// The wiring is in app.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"

	"github.com/muster-io/muster/cmd/muster-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewCommand(context.Background(), os.Args[1:], os.Stderr)))
}
