package localcluster

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the child when the thread that started
// it exits, so a test binary killed on timeout takes its operators along.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
