// Command muster-podgrouper runs the pod-grouper: it puts the pods of every
// defined workload into scheduler-plugins PodGroups (see README.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/component-base/cli"

	"github.com/muster-io/muster/cmd/muster-podgrouper/app"
)

func main() {
	// SIGTERM is how the kubelet stops a container: cancelling the context
	// lets the pod-grouper hand its lease back (ReleaseOnCancel), so the
	// standby replica takes over at once instead of after the lease expires.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	cmd := app.NewMainCommand()
	cmd.SetContext(ctx)
	code := cli.Run(cmd)
	stop()
	os.Exit(code)
}
