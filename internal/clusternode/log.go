package clusternode

import (
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// memberlistLog writes memberlist's log lines ("[DEBUG] memberlist: …")
// to a zap logger at their level: its debug lines (every stream
// connection, every push/pull) stay out of an info log.
type memberlistLog struct{ logger *zap.Logger }

// memberlistLevels are memberlist's level prefixes.
var memberlistLevels = map[string]zapcore.Level{
	"[DEBUG] ": zapcore.DebugLevel, "[INFO] ": zapcore.InfoLevel,
	"[WARN] ": zapcore.WarnLevel, "[ERR] ": zapcore.ErrorLevel,
}

func (m memberlistLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, msg := zapcore.InfoLevel, line
	for prefix, l := range memberlistLevels {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			level, msg = l, strings.TrimPrefix(rest, "memberlist: ")
			break
		}
	}
	if ce := m.logger.Check(level, msg); ce != nil {
		ce.Write()
	}
	return len(p), nil
}
