// Command muster shows Kubernetes AI workloads as their roles, GPUs, nodes
// and gangs. Installed as kubectl-muster it is also "kubectl muster".
// Everything lives in package cli; main only wires the process to it.
package main

import (
	"context"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}
