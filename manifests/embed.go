// Package manifests holds the install manifests as data. Its one Go file
// embeds what muster's binaries read of them: the scheduler configuration
// muster fit judges with, so that fit and the installed scheduler read the
// same profile.
package manifests

import _ "embed"

// SchedulerConfig is scheduler-config.yaml: the KubeSchedulerConfiguration
// of muster-scheduler that the kustomize set and the Helm chart install.
//
//go:embed scheduler-config.yaml
var SchedulerConfig []byte
