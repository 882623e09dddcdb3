// Command muster-podgrouper runs the pod-grouper: it puts the pods of every
// defined workload into scheduler-plugins PodGroups (see README.md).
package main

import (
	"os"

	"k8s.io/component-base/cli"

	"github.com/muster-io/muster/cmd/muster-podgrouper/app"
)

func main() {
	os.Exit(cli.Run(app.NewMainCommand()))
}
