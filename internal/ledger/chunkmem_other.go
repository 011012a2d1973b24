//go:build !unix

package ledger

// mapChunk, where there is no mmap: a heap slice (the garbage collector's
// headroom then counts the chunks).
func mapChunk(n int) ([]byte, error) { return make([]byte, 0, n), nil }

func unmapChunk([]byte) {}
