// Command muster-scheduler is the stock kube-scheduler with the MusterGang
// plugin registered. Before the command starts it asks the cluster whether it
// serves native PodGroups and, if so, turns on the GenericWorkload feature gate
// so the in-tree GangScheduling plugin handles pods with spec.schedulingGroup.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/muster-io/muster/internal/schedulerapp"
	"github.com/muster-io/muster/plugins/gang"
)

func main() {
	args, note := schedulerapp.Decide(context.Background(), os.Args[1:], schedulerapp.NewDiscovery)
	fmt.Fprintln(os.Stderr, "muster-scheduler:", note)
	cmd := app.NewSchedulerCommand(app.WithPlugin(gang.Name, gang.New))
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
