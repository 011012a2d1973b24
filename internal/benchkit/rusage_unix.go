//go:build unix

package benchkit

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// maxRSS is the peak resident set of an exited child, in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return rssBytes(ru.Maxrss)
}

// rssBytes converts ru_maxrss, which is KiB on Linux and the BSDs but
// bytes on macOS.
func rssBytes(v int64) int64 {
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return v
	}
	return v * 1024
}

// selfUsage is this process's CPU time and peak RSS so far.
func selfUsage() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return usage{cpu: tv(ru.Utime) + tv(ru.Stime), maxRSS: rssBytes(ru.Maxrss)}
}
