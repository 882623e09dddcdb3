// Command muster-sandbox runs muster on a throw-away in-process Kubernetes
// cluster with fake GPU nodes (`make run`). See internal/sandbox.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/muster-io/muster/internal/sandbox"
)

func main() {
	var cfg sandbox.Config
	fs := flag.NewFlagSet("muster-sandbox", flag.ExitOnError)
	fs.IntVar(&cfg.Nodes, "nodes", 4, "number of fake GPU nodes")
	fs.IntVar(&cfg.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu capacity of each node")
	fs.IntVar(&cfg.Zones, "zones", 2, "spread the nodes over this many zones (topology.kubernetes.io/zone)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", sandbox.DefaultKubeconfig(), "where to write the kubeconfig of the sandbox")
	fs.StringVar(&cfg.LogFile, "log-file", "", "control-plane log file (default: muster-sandbox.log beside the kubeconfig)")
	fs.BoolVar(&cfg.Keep, "keep", false, "stay up until Ctrl-C or SIGTERM, then shut down cleanly")
	fs.BoolVar(&cfg.NoExamples, "no-examples", false, "start an empty cluster")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: muster-sandbox [flags]\n\nAn in-process Kubernetes control plane with fake GPU nodes and muster.\nPrints \"ready: kubeconfig=PATH\" on stdout once everything is up.\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "muster-sandbox: unexpected arguments %v\n", fs.Args())
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := sandbox.Run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "muster-sandbox: %v\n", err)
		stop()
		os.Exit(1)
	}
}
