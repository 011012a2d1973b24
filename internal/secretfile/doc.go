// Package secretfile reads files that hold secrets: the *_FILE variants of
// secret settings and the partner's private key.
//
// A secret file is small (a password, a token, a PEM key), so Read refuses
// one larger than MaxSize rather than reading whatever a wrong path points
// at into memory. It also says when the file is readable by others than
// its owner: a world-readable secret is readable by every account on the
// machine. A group-readable one is reported too, unless the group is the
// process's own, which is how Kubernetes mounts a Secret for a pod whose
// securityContext sets fsGroup (mode 0440, group fsGroup): only that pod's
// processes share that group.
//
// Read looks at the path (following symlinks) before it opens it, and
// refuses anything but a regular file: opening a FIFO for reading would
// block until a writer came. The group counted as the process's own is its
// effective group or any of its supplementary groups.
//
// Secrets are rotated without a restart: a File keeps a secret's content
// and re-reads it when a stat says the file changed (StampOf: device,
// inode, size and mtime, so that a Kubernetes Secret volume's `..data`
// symlink swap counts), keeping the last good content when a re-read
// fails; a Watch only says that one of a set of files changed. Both cost a
// stat per call and own no goroutine.
//
// Nothing here logs: callers pass the warnings to their logger, and neither
// warnings nor errors carry the file's content.
package secretfile
