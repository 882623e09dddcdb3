//go:build !linux

package localcluster

import "os/exec"

// setPdeathsig is Linux-only; elsewhere an operator outlives a killed test
// binary.
func setPdeathsig(*exec.Cmd) {}
