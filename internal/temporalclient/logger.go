package temporalclient

import (
	"context"
	"log/slog"

	tlog "go.temporal.io/sdk/log"
)

// ErrorAttr is the attribute that carries an error on every Mantis log line.
const ErrorAttr = "err"

// sdkErrorKeys are the keys the Temporal SDK puts its errors under ("Error" for
// most lines, "error" for a few).
var sdkErrorKeys = map[string]bool{"Error": true, "error": true}

// Logger returns the Temporal SDK's logger writing through logger, with the
// SDK's error attributes renamed to ErrorAttr so that a search for err finds
// the SDK's failures too.
func Logger(logger *slog.Logger) tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(errorKeyHandler{logger.Handler()}))
}

// errorKeyHandler renames the SDK's error attributes to ErrorAttr.
type errorKeyHandler struct{ slog.Handler }

// Handle passes r on with its error attribute renamed.
func (h errorKeyHandler) Handle(ctx context.Context, r slog.Record) error {
	renamed := false
	r.Attrs(func(a slog.Attr) bool {
		renamed = sdkErrorKeys[a.Key]
		return !renamed
	})
	if !renamed {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(renameErrorAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

// WithAttrs renames the error attribute of attrs and keeps renaming on the
// derived handler.
func (h errorKeyHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = renameErrorAttr(a)
	}
	return errorKeyHandler{h.Handler.WithAttrs(out)}
}

// WithGroup keeps renaming on the derived handler.
func (h errorKeyHandler) WithGroup(name string) slog.Handler {
	return errorKeyHandler{h.Handler.WithGroup(name)}
}

func renameErrorAttr(a slog.Attr) slog.Attr {
	if sdkErrorKeys[a.Key] {
		a.Key = ErrorAttr
	}
	return a
}
