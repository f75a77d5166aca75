package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
)

// countingBody counts what the handler reads of a request's body.
type countingBody struct {
	io.ReadCloser
	read *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// A read-scope token POSTing 64 MiB to /codec/decode (an 800 MB one grew Mandible by
// 1.9 GB: the SDK's handler reads a body whole) is answered 413 with a problem naming
// the limit, after reading no more than the limit, whether the body declares its
// length or not.
func TestCodecEndpointRefusesBodyPastItsLimitUnread(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	h := httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec: c, Keys: apitoken.NewKeyring(codecTokens()), UIURL: uiOrigin, SessionKey: c.DeriveKey("session"),
	})
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{ReadCloser: r.Body, read: &read}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	for _, declared := range []bool{false, true} {
		read.Store(0)
		status, answer := postHostileBody(t, srv.Listener.Addr().String(), "/codec/decode", declared,
			"Authorization: Bearer "+codecToken+"\r\nContent-Type: application/json\r\n")
		require.LessOrEqual(t, read.Load(), int64(httpapi.DefaultCodecMaxBody+1), "bytes of the body read, declared length %v", declared)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, "declared length %v: %s", declared, answer)
		var problem struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal(answer, &problem))
		require.Equal(t, "too_large", problem.Code)
		require.Contains(t, problem.Detail, "http.max_codec_body_bytes")
	}

	// A body within the limit is still decoded.
	s := codecSetup{srv: srv, codec: c}
	body := s.sealedBody(t, "echo within-limit")
	resp := s.decode(t, body, func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+codecToken) })
	require.Equal(t, "echo within-limit", decodedString(t, resp))
}

// postHostileBody POSTs 64 MiB of whitespace to path at addr with the header lines
// given, its length declared or chunked, over a connection of its own: the body is
// written while the answer is read, since a server that stops reading answers before
// the body has been sent. It returns the answer's status and body.
func postHostileBody(t *testing.T, addr, path string, declared bool, header string) (int, []byte) {
	t.Helper()
	const hostile = 64 << 20
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	framing := "Transfer-Encoding: chunked"
	if declared {
		framing = "Content-Length: " + strconv.Itoa(hostile)
	}
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\n" + header + framing + "\r\n\r\n"
	go func() {
		// Errors end the writing: the server closes the connection once it has answered.
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte{' '}, 1<<20)
		for range hostile / len(chunk) {
			if !declared {
				if _, err := fmt.Fprintf(conn, "%x\r\n", len(chunk)); err != nil {
					return
				}
			}
			if _, err := conn.Write(chunk); err != nil {
				return
			}
			if !declared {
				if _, err := io.WriteString(conn, "\r\n"); err != nil {
					return
				}
			}
		}
		if !declared {
			_, _ = io.WriteString(conn, "0\r\n\r\n")
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, answer
}

// Codec requests are read and decoded a few at a time, so that their bodies together
// stay bounded however many connections send them: with eight bodies arriving slowly,
// a ninth caller waits, and is answered once one of them goes.
func TestCodecEndpointReadsFewBodiesAtOnce(t *testing.T) {
	t.Parallel()
	c := newTestCodec(t)
	h := httpapi.NewCodecEndpoint(httpapi.CodecOptions{
		Codec: c, Keys: apitoken.NewKeyring(codecTokens()), UIURL: uiOrigin, SessionKey: c.DeriveKey("session"),
	})
	var read atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{ReadCloser: r.Body, read: &read}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	const slow, started = 8, `{"payloads"`
	var stallers []net.Conn
	for range slow {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		_, err = io.WriteString(conn, "POST /codec/decode HTTP/1.1\r\nHost: codec\r\nAuthorization: Bearer "+codecToken+
			"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"+started)
		require.NoError(t, err)
		stallers = append(stallers, conn)
	}
	require.Eventually(t, func() bool { return read.Load() == slow*int64(len(started)) }, 10*time.Second, 10*time.Millisecond,
		"every slow body being read")

	s := codecSetup{srv: srv, codec: c}
	body := s.sealedBody(t, "echo waited")
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/codec/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "default")
	req.Header.Set("Authorization", "Bearer "+codecToken)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			resp = &http.Response{StatusCode: 0, Body: io.NopCloser(strings.NewReader(err.Error()))}
		}
		answered <- resp
	}()
	isAnswered := func() bool { return len(answered) > 0 }
	require.Never(t, isAnswered, time.Second, 20*time.Millisecond, "a ninth body was read beside eight")
	stallers[0].Close()
	require.Eventually(t, isAnswered, 10*time.Second, 20*time.Millisecond, "the ninth caller is answered once a turn frees")
	resp := <-answered
	defer resp.Body.Close()
	require.Equal(t, "echo waited", decodedString(t, resp))
}
