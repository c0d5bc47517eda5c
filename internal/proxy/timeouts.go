package proxy

import (
	"errors"
	"io"
	"net/http"
	"time"
)

// Timeouts returns h with per-operation deadlines on its connections:
// every read of a request body must make progress within read, and every
// write (or flush) of a response within write. Unlike http.Server's
// ReadTimeout and WriteTimeout, which bound a whole request, they never
// cut off a request that waits for its slot or a stream (server-sent
// events) that stays open for minutes, only a peer that stalls. Zero
// leaves that side without a deadline.
func Timeouts(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if write > 0 {
			// A keep-alive connection keeps the last request's deadline.
			_ = rc.SetWriteDeadline(time.Time{})
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: write}
			// The server's final flush, after h returns, gets its time too.
			defer dw.extend()
			w = dw
		}
		if read > 0 && r.Body != nil && r.Body != http.NoBody {
			r.Body = &deadlineReader{ReadCloser: r.Body, rc: rc, d: read}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineWriter sets the write deadline before every write and flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

// FlushError flushes, for http.ResponseController (which the reverse
// proxy flushes streams with).
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// deadlineReader sets the read deadline before every read of the body,
// and clears it at the end of the body: the server then reads the
// connection in the background to notice a client that goes away, and a
// deadline would end that read, and the request's context with it.
type deadlineReader struct {
	io.ReadCloser
	rc *http.ResponseController
	d  time.Duration
}

func (b *deadlineReader) Read(p []byte) (int, error) {
	_ = b.rc.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
