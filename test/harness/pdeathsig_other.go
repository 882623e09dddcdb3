//go:build !linux

package harness

import "os/exec"

// setPdeathsig is Linux-only; elsewhere an operator outlives a killed test
// binary.
func setPdeathsig(*exec.Cmd) {}
