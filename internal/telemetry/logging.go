package telemetry

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Redacted replaces every value the logger refuses to print.
const Redacted = "[REDACTED]"

// LogOptions configures NewLogger. The zero value is JSON at info level on
// stderr.
type LogOptions struct {
	Format string // "json" (default) or "console"
	Level  string // debug, info (default), warn, error
	Output io.Writer
}

// NewLogger builds a zap logger whose core redacts secrets and personal data
// (see RedactingCore).
func NewLogger(opts LogOptions) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if opts.Level != "" {
		if err := level.UnmarshalText([]byte(opts.Level)); err != nil {
			return nil, fmt.Errorf("log level %q: %w", opts.Level, err)
		}
	}
	out := opts.Output
	if out == nil {
		out = os.Stderr
	}
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch opts.Format {
	case "", "json":
		enc = zapcore.NewJSONEncoder(encCfg)
	case "console":
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		encCfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(encCfg)
	default:
		return nil, fmt.Errorf("log format %q: want json or console", opts.Format)
	}
	core := zapcore.NewCore(enc, zapcore.AddSync(out), level)
	return zap.New(RedactingCore(core)), nil
}

// sensitiveKeys are field keys (lower-cased, without '_' and '-') whose
// values never reach an encoder.
var sensitiveKeys = map[string]bool{
	"password": true, "clientsecret": true, "secret": true, "token": true, "accesstoken": true,
	"refreshtoken": true, "authorization": true, "sign": true, "privatekey": true, "partnerkey": true,
	"phone": true, "email": true, "fullname": true, "firstname": true, "lastname": true,
	"idnumber": true, "nationalid": true, "passportnumber": true, "address": true, "birthday": true,
	"dateofbirth": true, "placeofbirth": true, "placeofissue": true, "value": true, "body": true,
}

// jwtLike matches compact JWS (three base64url parts, the first a JSON
// object) and bearer credentials wherever they appear in a string.
var jwtLike = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*|(?i)bearer\s+[A-Za-z0-9._~+/=-]+`)

// IsSensitiveKey reports whether a field or JSON key names a secret or a
// personal datum.
func IsSensitiveKey(key string) bool {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "").Replace(key))
	if sensitiveKeys[k] {
		return true
	}
	return strings.Contains(k, "secret") || strings.Contains(k, "password") || strings.HasSuffix(k, "token")
}

// ScrubString removes token-shaped substrings from s.
func ScrubString(s string) string {
	if !strings.Contains(s, "eyJ") && !strings.Contains(strings.ToLower(s), "bearer") {
		return s
	}
	return jwtLike.ReplaceAllString(s, Redacted)
}

// RedactingCore wraps core so that fields with sensitive keys are replaced
// by Redacted and token-shaped strings are scrubbed from string and error
// fields and from the message.
func RedactingCore(core zapcore.Core) zapcore.Core { return redactingCore{core} }

type redactingCore struct{ zapcore.Core }

func (c redactingCore) With(fields []zapcore.Field) zapcore.Core {
	return redactingCore{c.Core.With(redactFields(fields))}
}

func (c redactingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c redactingCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	e.Message = ScrubString(e.Message)
	return c.Core.Write(e, redactFields(fields))
}

func redactFields(fields []zapcore.Field) []zapcore.Field {
	out := fields
	copied := false
	set := func(i int, f zapcore.Field) {
		if !copied {
			out = append([]zapcore.Field(nil), fields...)
			copied = true
		}
		out[i] = f
	}
	for i, f := range fields {
		if IsSensitiveKey(f.Key) {
			set(i, zap.String(f.Key, Redacted))
			continue
		}
		switch f.Type {
		case zapcore.StringType:
			if s := ScrubString(f.String); s != f.String {
				set(i, zap.String(f.Key, s))
			}
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				if s := ScrubString(err.Error()); s != err.Error() {
					set(i, zap.String(f.Key, s))
				}
			}
		}
	}
	return out
}
