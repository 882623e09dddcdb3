package localcluster

import (
	"io"
	"os"
	"strconv"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// VerboseEnv names the environment variable that, set to 1, sends the
// control plane's logs to stderr instead of discarding them.
const VerboseEnv = "MUSTER_TEST_VERBOSE"

// VerbosityEnv names the environment variable that sets the klog verbosity
// of those logs (default 0), e.g. MUSTER_TEST_V=5 for the scheduling queue's
// decisions.
const VerbosityEnv = "MUSTER_TEST_V"

var logOnce sync.Once

// logOutput picks where component logs go: the caller's writer, stderr when
// MUSTER_TEST_VERBOSE=1, otherwise nowhere. A single apiserver start writes
// 150-200 harmless klog lines; a test run should not drown in them.
func logOutput(w io.Writer) io.Writer {
	if w != nil {
		return w
	}
	if os.Getenv(VerboseEnv) == "1" {
		return os.Stderr
	}
	return io.Discard
}

// configureKlog routes the process-global klog (and so every component
// logging through klog.Background or a context without a logger) to w. klog
// is global, so only the first control plane of a process decides.
func configureKlog(w io.Writer) {
	logOnce.Do(func() {
		v, _ := strconv.Atoi(os.Getenv(VerbosityEnv))
		klog.SetLoggerWithOptions(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(w), textlogger.Verbosity(v))), klog.ContextualLogger(true))
	})
}

// etcdLogger writes etcd's errors to w, or nothing at all.
func etcdLogger(w io.Writer) *zap.Logger {
	if w == io.Discard {
		return zap.NewNop()
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.ErrorLevel))
}
