// Package app wires muster-scheduler: the stock kube-scheduler command with
// muster's plugins registered, and what it decides before it hands over to
// that command — whether the cluster serves native PodGroups, and the
// feature-gate flag that follows from it.
package app

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/muster-io/muster/plugins/gang"
)

// Plugins registers muster's out-of-tree plugins with a kube-scheduler
// command. The shipped binary and the in-process sandbox use the same list.
func Plugins() []schedapp.Option {
	return []schedapp.Option{schedapp.WithPlugin(gang.Name, gang.New)}
}

// NewCommand returns the kube-scheduler command with muster's plugins, its
// arguments adjusted to what the cluster serves (see Decide). The decision is
// printed to stderr before the command starts, so an operator reading the
// log sees which gang mechanism handles native PodGroups.
func NewCommand(ctx context.Context, args []string, stderr io.Writer) *cobra.Command {
	args, note := Decide(ctx, args, NewDiscovery)
	fmt.Fprintln(stderr, "muster-scheduler:", note)
	cmd := schedapp.NewSchedulerCommand(Plugins()...)
	cmd.SetArgs(args)
	return cmd
}
