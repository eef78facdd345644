package emulate

import "syscall"

// ownProcessGroup starts a child process (an emulator, a Lambda process) in a process group of its
// own, so that the terminal's Ctrl-C, which goes to the whole foreground process group, reaches the
// runner only: the runner finishes its summary and report first and then stops its children itself
// (Run.Close). The children still never outlive it: the emulators exit when their stdin closes.
func ownProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
