// Command muster-sandbox runs muster on a throw-away in-process Kubernetes
// cluster with fake GPU nodes, the real operators its examples need and the
// example workloads of examples/ (`make run`). See app/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/muster-io/muster/cmd/muster-sandbox/app"
)

func main() {
	var cfg app.Config
	fs := flag.NewFlagSet("muster-sandbox", flag.ExitOnError)
	fs.IntVar(&cfg.Nodes, "nodes", 4, "number of fake GPU nodes")
	fs.IntVar(&cfg.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu capacity of each node")
	fs.IntVar(&cfg.Zones, "zones", 2, "spread the nodes over this many zones (topology.kubernetes.io/zone)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", app.DefaultKubeconfig(), "where to write the kubeconfig of the sandbox")
	fs.StringVar(&cfg.LogFile, "log-file", "", "control-plane log file (default: muster-sandbox.log beside the kubeconfig)")
	fs.BoolVar(&cfg.Keep, "keep", false, "stay up until Ctrl-C or SIGTERM, then shut down cleanly")
	fs.BoolVar(&cfg.NoExamples, "no-examples", false, "start without operators and example workloads")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: muster-sandbox [flags]

An in-process Kubernetes control plane with fake GPU nodes, muster-scheduler
and the pod-grouper. Unless --no-examples, it also runs the real operators
the example workloads of examples/ name (built on the first run, about two
minutes each, then cached), applies the examples and prints the
"muster describe" view of each. Run it from the muster source tree.

Prints "ready: kubeconfig=PATH" on stdout once everything is up.

`)
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "muster-sandbox: unexpected arguments %v\n", fs.Args())
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg); err != nil {
		interrupted := ctx.Err() != nil
		stop() // also cancels ctx
		if interrupted {
			// Ctrl-C before the sandbox was ready: it has shut down cleanly.
			fmt.Fprintln(os.Stderr, "muster-sandbox: interrupted")
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "muster-sandbox: %v\n", err)
		os.Exit(1)
	}
}
