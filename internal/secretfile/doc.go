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
// Nothing here logs: callers pass the warnings to their logger, and neither
// warnings nor errors carry the file's content.
package secretfile
