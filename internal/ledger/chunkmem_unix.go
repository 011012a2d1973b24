//go:build unix

package ledger

import (
	"fmt"
	"syscall"
)

// mapChunk returns n bytes of anonymous memory outside the Go heap, as a
// slice of length 0 and capacity n.
func mapChunk(n int) ([]byte, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("ledger: map a chunk of %d bytes: %w", n, err)
	}
	return b[:0], nil
}

// unmapChunk returns a chunk mapChunk made; nothing may read it after.
func unmapChunk(b []byte) {
	// Munmap fails only for a region that is not a mapping, which a
	// chunk always is.
	_ = syscall.Munmap(b[:cap(b)])
}
