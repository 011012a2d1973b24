//go:build !unix

package benchkit

import "os"

// maxRSS is unknown on this platform.
func maxRSS(*os.ProcessState) int64 { return 0 }

// selfUsage is unknown on this platform.
func selfUsage() usage { return usage{} }
