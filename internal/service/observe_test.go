package service

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// franz-go's info lines are debug lines here: at info, the client is asked
// for warnings only and an info line it still sends is not written.
func TestKafkaLoggerInfoIsDebug(t *testing.T) {
	for _, tc := range []struct {
		level     zapcore.Level
		wantLevel kgo.LogLevel
		wantInfo  int // entries written for one franz-go info line
	}{
		{zapcore.DebugLevel, kgo.LogLevelDebug, 1},
		{zapcore.InfoLevel, kgo.LogLevelWarn, 0},
		{zapcore.WarnLevel, kgo.LogLevelWarn, 0},
		{zapcore.ErrorLevel, kgo.LogLevelError, 0},
	} {
		core, logs := observer.New(tc.level)
		k := kafkaLogger{zap.New(core)}
		if got := k.Level(); got != tc.wantLevel {
			t.Errorf("zap %s: franz-go level %v, want %v", tc.level, got, tc.wantLevel)
		}
		k.Log(kgo.LogLevelInfo, "joined group", "group", "g")
		if got := logs.Len(); got != tc.wantInfo {
			t.Errorf("zap %s: an info line wrote %d entries, want %d", tc.level, got, tc.wantInfo)
		}
		k.Log(kgo.LogLevelWarn, "heartbeat failed")
		if tc.level <= zapcore.WarnLevel && logs.FilterMessage("heartbeat failed").Len() != 1 {
			t.Errorf("zap %s: a warning was not written", tc.level)
		}
	}
}
