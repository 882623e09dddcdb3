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
	"path/filepath"
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
	fs.BoolVar(&cfg.Native, "native", false, "native gangs: Kubernetes' own PodGroups (GenericWorkload gate on), written by the pod-grouper and its webhook, placed by the default kube-scheduler instead of muster-scheduler")
	fs.BoolVar(&cfg.DRA, "dra", false, "publish the fake GPUs only through DRA: one ResourceSlice per node of --gpus-per-node devices under the DeviceClass gpu.nvidia.com (which also maps nvidia.com/gpu to them), no nvidia.com/gpu in the nodes' allocatable")
	fs.BoolVar(&cfg.Kueue, "kueue", false, "run the real Kueue in front of muster: ClusterQueue gpus with --kueue-gpus of quota, LocalQueue default in namespace default, and the examples of examples/kueue (two JobSets that each need the whole quota) in place of the others")
	fs.IntVar(&cfg.KueueGPUs, "kueue-gpus", 0, "nvidia.com/gpu quota of Kueue's ClusterQueue gpus with --kueue (0: every GPU of the sandbox)")
	fs.BoolVar(&cfg.NoMuster, "no-muster", false, "start without muster-scheduler and the pod-grouper, for your own builds (implies --keep; examples are not applied)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: muster-sandbox [flags]

An in-process Kubernetes control plane with fake GPU nodes, muster-scheduler
and the pod-grouper. Unless --no-examples, it also runs the real operators
the example workloads of examples/ name (built on the first run, 2–5 minutes
at the same time, then cached), applies the examples and prints the
"muster describe" view of each. Run it from the muster source tree.

The kubeconfig's context is named muster-sandbox. With --keep the sandbox
prints "ready: kubeconfig=PATH" on stdout once everything is up, and the
next commands to type on stderr; without it, it stops after the examples.

With --no-muster it runs the control plane, the controllers, the nodes and
the operators, but neither muster-scheduler nor the pod-grouper: run your
own builds against the kubeconfig, the scheduler with the shipped
configuration pointed at the sandbox, which it writes beside the kubeconfig
as %s. It prints the commands; nothing is
scheduled until they run.

Examples:
  # The examples, then stop (make run)
  muster-sandbox

  # Stay up with 8 nodes of 8 GPUs in 2 zones, kubeconfig where you want it
  muster-sandbox --nodes 8 --gpus-per-node 8 --zones 2 --keep --kubeconfig /tmp/muster.kubeconfig

  # Native gangs: the default kube-scheduler places every defined kind's
  # gangs on the pod-grouper's scheduling.k8s.io/v1beta1 PodGroups
  muster-sandbox --native --keep

  # GPUs as DRA devices: pods claim them with ResourceClaimTemplates of
  # the class gpu.nvidia.com, or ask for nvidia.com/gpu as usual
  muster-sandbox --dra --keep

  # Kueue in front: quota first (Kueue), then the gang placed whole
  # (muster); submit with the label kueue.x-k8s.io/queue-name=default
  muster-sandbox --kueue --keep

  # An empty cluster for your own workloads
  muster-sandbox --no-examples --keep

  # Your own muster-scheduler and pod-grouper builds against the sandbox
  muster-sandbox --no-muster
  go run ./cmd/muster-podgrouper --kubeconfig %s
  go run ./cmd/muster-scheduler --config %s

Flags:
`, app.SchedulerConfigFile, app.DefaultKubeconfig(), filepath.Join(filepath.Dir(app.DefaultKubeconfig()), app.SchedulerConfigFile))
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
