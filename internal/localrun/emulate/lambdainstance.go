package emulate

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

func (f *Function) acquire() (*instance, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errors.New("function closed")
	}
	for len(f.idle) > 0 {
		inst := f.idle[len(f.idle)-1]
		f.idle = f.idle[:len(f.idle)-1]
		select {
		case <-inst.exited:
			continue
		default:
		}
		f.running++
		f.mu.Unlock()
		return inst, nil
	}
	if f.Concurrency > 0 && f.running >= f.Concurrency {
		f.mu.Unlock()
		f.concurrencyThrottled.Add(1)
		return nil, &ThrottleError{Reason: ReasonReservedConcurrency}
	}
	f.running++
	f.mu.Unlock()
	inst, err := f.start()
	if err != nil {
		f.mu.Lock()
		f.running--
		f.mu.Unlock()
		return nil, err
	}
	return inst, nil
}

func (f *Function) release(inst *instance, reusable bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if reusable && !f.closed {
		select {
		case <-inst.exited:
		default:
			f.idle = append(f.idle, inst)
			return
		}
	}
	inst.kill()
}

// Redeploy changes the variables of the function's next execution environments, as a deployment
// of a configuration change does: the idle environments end, and the next invocation starts a
// new one; an invocation in progress finishes in its own.
func (f *Function) Redeploy(edit func(env []string) []string) {
	f.mu.Lock()
	f.Env = edit(slices.Clone(f.Env))
	idle := f.idle
	f.idle = nil
	f.mu.Unlock()
	for _, inst := range idle {
		inst.kill()
	}
}

// KillRunning kills every process that is handling an invocation right now.
func (f *Function) KillRunning() int {
	return f.eachBusy(func(inst *instance) bool { inst.kill(); return true })
}

// eachBusy calls do for every process handling an invocation right now, and counts the ones it
// acted on.
func (f *Function) eachBusy(do func(*instance) bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for inst := range f.all {
		inst.mu.Lock()
		busy := inst.cur != nil
		inst.mu.Unlock()
		if busy && do(inst) {
			n++
		}
	}
	return n
}

// FreezeRunning stops (SIGSTOP) every process that is handling an invocation right now, as a
// process that makes no more progress (a stuck call, a hung dependency): it is killed at the
// function timeout like any other, and the invocation reports Sandbox.Timedout.
func (f *Function) FreezeRunning() int {
	return f.eachBusy(func(inst *instance) bool {
		if inst.cmd == nil || inst.cmd.Process == nil {
			return false
		}
		inst.cmd.Process.Signal(syscall.SIGSTOP)
		return true
	})
}

// Close stops every execution environment of the function.
func (f *Function) Close() {
	f.mu.Lock()
	f.closed = true
	all := f.all
	f.all = nil
	f.idle = nil
	f.mu.Unlock()
	for inst := range all {
		inst.kill()
		<-inst.exited
	}
}

func (f *Function) start() (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	inst := &instance{fn: f, ln: ln, next: make(chan *invocation), exited: make(chan struct{}), startedAt: time.Now()}
	mux := http.NewServeMux()
	const base = "/2018-06-01/runtime/"
	mux.HandleFunc("GET "+base+"invocation/next", inst.handleNext)
	mux.HandleFunc("POST "+base+"invocation/{id}/response", inst.handleResponse)
	mux.HandleFunc("POST "+base+"invocation/{id}/error", inst.handleError)
	mux.HandleFunc("POST "+base+"init/error", inst.handleInitError)
	inst.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go inst.srv.Serve(ln)

	cmd := exec.Command(f.Binary)
	cmd.SysProcAttr = ownProcessGroup()
	cmd.Env = append(append([]string{}, f.Env...),
		"AWS_LAMBDA_RUNTIME_API="+ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME="+f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(cmpOrInt(f.MemoryMB, 128)),
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/"+f.Name,
		"_HANDLER=bootstrap",
	)
	out := &byteCounter{w: cmp.Or[io.Writer](f.Logs, io.Discard), n: &f.logBytes}
	cmd.Stdout, cmd.Stderr = out, out
	if f.LogLine != nil {
		cmd.Stdout = NewLineTap(out, f.LogLine)
	}
	if err := cmd.Start(); err != nil {
		inst.srv.Close()
		return nil, fmt.Errorf("start %s: %w", f.Binary, err)
	}
	inst.cmd = cmd
	f.mu.Lock()
	if f.all == nil {
		f.all = map[*instance]bool{}
	}
	f.all[inst] = true
	f.mu.Unlock()
	go func() {
		err := cmd.Wait()
		inst.mu.Lock()
		inst.waitErr = err
		inst.mu.Unlock()
		inst.srv.Close()
		f.mu.Lock()
		delete(f.all, inst)
		f.mu.Unlock()
		close(inst.exited)
	}()
	return inst, nil
}

// byteCounter counts the bytes written through it.
type byteCounter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *byteCounter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.w.Write(p)
}

func (inst *instance) kill() {
	if inst.cmd != nil && inst.cmd.Process != nil {
		inst.cmd.Process.Kill()
	}
}
