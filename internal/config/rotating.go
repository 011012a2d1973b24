package config

import (
	"strings"

	"go.uber.org/zap"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
)

// rotatingSecret is a secret setting that came from a *_FILE variable: its
// value is the file's current content (trimmed as flagenv trims it),
// re-read when a stat says the file changed, so that a rotated Kubernetes
// Secret is used at the next connection or request without a restart. A
// failed re-read keeps the last good value and is logged once per version
// of the file; no log line carries the value.
type rotatingSecret struct {
	variable string // e.g. LOYALTY_BRIDGE_KAFKA_SASL_PASSWORD_FILE
	file     *secretfile.File
	log      *zap.Logger
}

// secretFile returns the rotating secret of flag name when its value came
// from a *_FILE, nil otherwise (the value given stays as it is). The file
// was read by the parse already, which reported its mode.
func secretFile(b *flagenv.Binder, name string, log *zap.Logger) (*rotatingSecret, error) {
	if b == nil {
		return nil, nil
	}
	path := b.SecretFile(name)
	if path == "" {
		return nil, nil
	}
	variable := b.Vars()[name].Name + "_FILE"
	f, _, err := secretfile.Open(path)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &rotatingSecret{variable: variable, file: f, log: log}, nil
}

// value is the secret's current value. Safe for concurrent use; it costs a
// stat while the file is unchanged.
func (s *rotatingSecret) value() string {
	data, changed, warning, err := s.file.Current()
	switch {
	case err != nil:
		s.log.Error(s.variable+": the file changed but cannot be read; the last good value stays in use", zap.Error(err))
	case changed:
		s.log.Info(s.variable + ": the file changed; its new value is used from now on")
		if warning != "" {
			s.log.Warn(s.variable + ": " + warning)
		}
	}
	return strings.TrimSpace(string(data))
}
