package pyreader

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvPython names the Python interpreter that has scripts/pyreader's
// requirements installed: `scripts/pyreader/venv` prints it.
const EnvPython = "LOYALTY_BRIDGE_TEST_PYTHON"

// Python returns the interpreter EnvPython names, or skips tb when it is
// unset. A name that is set but is no executable file fails tb: a CI that
// meant to run the Python reader must not pass by skipping it.
func Python(tb testing.TB) string {
	tb.Helper()
	py := strings.TrimSpace(os.Getenv(EnvPython))
	if py == "" {
		tb.Skipf("no Python reader: set %s to the python of the venv that scripts/pyreader/venv makes", EnvPython)
	}
	fi, err := os.Stat(py)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		tb.Fatalf("%s=%s: not an executable file (%v)", EnvPython, py, err)
	}
	return py
}

// Script returns the path of read_replies.py in this source tree. It is
// found from this file's own path, which go test always knows.
func Script() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("pyreader: the source path of the package is unknown")
	}
	p := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "pyreader", "read_replies.py")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("pyreader: script: %w", err)
	}
	return p, nil
}

// Options configure Read. Python, Brokers, Registry and Topics are required.
type Options struct {
	// Python is the interpreter (see EnvPython).
	Python string
	// Script is read_replies.py; empty means Script().
	Script string
	// Brokers is the bootstrap list of the cluster.
	Brokers []string
	// Registry is the Schema Registry URL.
	Registry string
	// Topics are read from their beginning, every partition.
	Topics []string
	// Count is how many records to read at least; the reader also reads
	// on to the end of every partition, so more records are returned when
	// the topics hold more. Zero: to the end of every partition.
	Count int
	// Timeout bounds the reader's own reading (its --timeout); the
	// process is killed if it has not exited a minute after. Default 60s.
	Timeout time.Duration
}

// Record is one record as the Python reader printed it.
type Record struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Timestamp int64    `json:"timestamp"` // milliseconds since the epoch
	Key       *string  `json:"key"`       // nil: a null key
	Headers   []Header `json:"headers"`
	// Value is the decoded value as the script tagged it; nil when Error
	// is set.
	Value json.RawMessage `json:"value"`
	// Error is why the key or value could not be decoded.
	Error string `json:"error"`
}

// Where is the record's topic/partition@offset, for messages.
func (r Record) Where() string { return fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset) }

// Header is one record header as the Python reader printed it: Value when
// the bytes are UTF-8 (nil for a null header), ValueB64 otherwise.
type Header struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// Bytes returns the header's value; nil for a null header.
func (h Header) Bytes() ([]byte, error) {
	switch {
	case h.ValueB64 != nil:
		b, err := base64.StdEncoding.DecodeString(*h.ValueB64)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", h.Key, err)
		}
		return b, nil
	case h.Value != nil:
		return []byte(*h.Value), nil
	}
	return nil, nil
}

// Exit statuses of read_replies.py (see its doc).
const (
	exitTimeout   = 2
	exitUndecoded = 3
)

// Read runs the Python reader and returns the records it printed, in the
// order it read them. An error says why the run was not complete: the
// reader's deadline passed, it could not decode some records (they are
// returned too, with Error set), or it failed; the reader's stderr is in
// the error. Records printed before a failure are returned with it.
func Read(ctx context.Context, o Options) ([]Record, error) {
	if o.Python == "" || len(o.Brokers) == 0 || o.Registry == "" || len(o.Topics) == 0 {
		return nil, errors.New("pyreader: Options.Python, Brokers, Registry and Topics are required")
	}
	if o.Script == "" {
		s, err := Script()
		if err != nil {
			return nil, err
		}
		o.Script = s
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout+time.Minute)
	defer cancel()
	args := []string{o.Script, "--brokers", strings.Join(o.Brokers, ","), "--registry", o.Registry,
		"--count", strconv.Itoa(o.Count), "--timeout", strconv.FormatFloat(o.Timeout.Seconds(), 'f', -1, 64)}
	cmd := exec.CommandContext(ctx, o.Python, append(args, o.Topics...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	recs, parseErr := parse(&stdout)
	if parseErr != nil {
		return recs, fmt.Errorf("pyreader: %w (stderr: %s)", parseErr, tail(stderr.String()))
	}
	var exit *exec.ExitError
	switch {
	case runErr == nil:
		return recs, nil
	case errors.As(runErr, &exit) && exit.ExitCode() == exitUndecoded:
		var bad []string
		for _, r := range recs {
			if r.Error != "" {
				bad = append(bad, r.Where()+": "+r.Error)
			}
		}
		return recs, fmt.Errorf("pyreader: %d of %d records not decoded, the first: %s", len(bad), len(recs), first(bad))
	case errors.As(runErr, &exit) && exit.ExitCode() == exitTimeout:
		return recs, fmt.Errorf("pyreader: deadline %s passed with %d records read: %s", o.Timeout, len(recs), tail(stderr.String()))
	}
	return recs, fmt.Errorf("pyreader: %s: %w (stderr: %s)", o.Script, runErr, tail(stderr.String()))
}

func parse(out *bytes.Buffer) ([]Record, error) {
	var recs []Record
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return recs, fmt.Errorf("output line %d: %w", len(recs)+1, err)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return recs, fmt.Errorf("output: %w", err)
	}
	return recs, nil
}

// tail is the end of a process's stderr, enough for a traceback's last lines.
func tail(s string) string {
	const keep = 2000
	s = strings.TrimSpace(s)
	if len(s) > keep {
		s = "…" + s[len(s)-keep:]
	}
	return s
}

func first(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return s[0]
}
