package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// waitFor bounds every wait for something a stream should deliver.
const waitFor = 20 * time.Second

type bundle struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	broker *Broker
	srv    *httptest.Server
	a, b   uuid.UUID // two deployments
	run    func()    // starts the broker when setup was told not to
}

type setupOptions struct {
	broker  BrokerOptions
	handler HandlerOptions
	// smallBuffers shrinks the server's socket send buffers, so that a client that
	// stops reading blocks the server's writes after a few kilobytes.
	smallBuffers bool
	// deferStart leaves the broker stopped until bundle.run is called.
	deferStart bool
}

func setup(t *testing.T, o setupOptions) *bundle {
	t.Helper()
	ctx := context.Background()
	pool := testenv.MigratedPool(t)
	b := &bundle{ctx: ctx, pool: pool, a: uuid.New(), b: uuid.New()}
	for _, id := range []uuid.UUID{b.a, b.b} {
		_, err := pool.Exec(ctx, `INSERT INTO deployments (id, name, priority, spec) VALUES ($1, 'sse', 'normal', '{}')`, id)
		require.NoError(t, err)
	}
	o.broker.DB = pool
	if o.broker.PollInterval == 0 {
		o.broker.PollInterval = 10 * time.Millisecond
	}
	if o.broker.MaxHold == 0 {
		o.broker.MaxHold = time.Hour
	}
	b.broker = NewBroker(o.broker)
	b.srv = httptest.NewUnstartedServer(NewHandler(b.broker, o.handler))
	if o.smallBuffers {
		b.srv.Listener = smallBufferListener{b.srv.Listener}
	}
	b.srv.Start()
	t.Cleanup(b.srv.Close) // after the broker has stopped and ended the streams

	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	var once sync.Once
	b.run = func() {
		once.Do(func() {
			go func() {
				defer close(stopped)
				_ = b.broker.Run(runCtx)
			}()
		})
	}
	t.Cleanup(func() {
		cancel()
		b.run() // so that stopped closes
		<-stopped
	})
	if !o.deferStart {
		b.run()
	}
	return b
}

type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// insert commits one event and returns its id.
func (b *bundle) insert(t *testing.T, deployment *uuid.UUID, typ string, data any) int64 {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	id := insertIn(t, tx, deployment, typ, data)
	require.NoError(t, tx.Commit(b.ctx))
	return id
}

// insertIn inserts one event in tx and returns its id.
func insertIn(t *testing.T, tx pgx.Tx, deployment *uuid.UUID, typ string, data any) int64 {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, schema.InsertEvent(ctx, tx, deployment, typ, data))
	var id int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT currval(pg_get_serial_sequence('deployment_events', 'id'))`).Scan(&id))
	return id
}

// item is one thing read from a stream: an event, or a comment.
type item struct {
	id      int64
	typ     string
	data    map[string]any
	comment string
}

// client is one SSE connection.
type client struct {
	r      *bufio.Reader
	cancel context.CancelFunc
	items  chan item
	mu     sync.Mutex
	err    error // why items was closed
}

type openOptions struct {
	lastEventID string // sent as the Last-Event-ID header when set
	// smallReceiveBuffer shrinks the client's socket receive buffer.
	smallReceiveBuffer bool
}

// open connects to path and returns once the stream's headers arrived.
func (b *bundle) open(t *testing.T, path string, o openOptions) *client {
	t.Helper()
	c, err := b.dial(t, path, o)
	require.NoError(t, err)
	return c
}

// dial is open for other goroutines than the test's: it returns its failure.
func (b *bundle) dial(t *testing.T, path string, o openOptions) (*client, error) {
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	dialer := &net.Dialer{}
	if o.smallReceiveBuffer {
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var err error
			if cerr := c.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); cerr != nil {
				return cerr
			}
			return err
		}
	}
	httpClient := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+path, nil)
	if err != nil {
		return nil, err
	}
	if o.lastEventID != "" {
		req.Header.Set("Last-Event-ID", o.lastEventID)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { resp.Body.Close() })
	h := resp.Header
	if resp.StatusCode != http.StatusOK || h.Get("Content-Type") != "text/event-stream" ||
		h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
		return nil, fmt.Errorf("GET %s: %s, headers %v", path, resp.Status, h)
	}
	return &client{r: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

// read parses the next complete event or comment; a frame cut short by the end of
// the stream is an error.
func (c *client) read() (item, error) {
	var it item
	seen := false
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				err = io.ErrUnexpectedEOF
			}
			return item{}, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return it, nil
			}
			continue
		}
		seen = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			it.comment = value
		case "id":
			if it.id, err = strconv.ParseInt(value, 10, 64); err != nil {
				return item{}, fmt.Errorf("bad id line %q", line)
			}
		case "event":
			it.typ = value
		case "data":
			if err := json.Unmarshal([]byte(value), &it.data); err != nil {
				return item{}, fmt.Errorf("bad data line %q: %w", line, err)
			}
		default:
			return item{}, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// start reads the stream in the background into c.items.
func (c *client) start() *client {
	c.items = make(chan item, 10000)
	go func() {
		for {
			it, err := c.read()
			if err != nil {
				c.mu.Lock()
				c.err = err
				c.mu.Unlock()
				close(c.items)
				return
			}
			c.items <- it
		}
	}()
	return c
}

// nextItem returns the next item read in the background, if it arrives by deadline.
func (c *client) nextItem(deadline time.Time) (item, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case it, ok := <-c.items:
		if !ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			return item{}, fmt.Errorf("stream ended: %w", c.err)
		}
		return it, nil
	case <-timer.C:
		return item{}, errors.New("the stream did not deliver in time")
	}
}

// next returns the next item; deadline is optional and defaults to waitFor from now.
func (c *client) next(t *testing.T, deadline ...time.Time) item {
	t.Helper()
	d := time.Now().Add(waitFor)
	if len(deadline) > 0 {
		d = deadline[0]
	}
	it, err := c.nextItem(d)
	require.NoError(t, err)
	return it
}

// events returns the next n events, skipping comments.
func (c *client) events(t *testing.T, n int) []item {
	t.Helper()
	var out []item
	deadline := time.Now().Add(waitFor)
	for len(out) < n {
		if it := c.next(t, deadline); it.comment == "" {
			out = append(out, it)
		}
	}
	return out
}

// until returns the events up to and including the one with id last.
func (c *client) until(t *testing.T, last int64) []item {
	t.Helper()
	var out []item
	deadline := time.Now().Add(waitFor)
	for {
		it := c.next(t, deadline)
		if it.comment != "" {
			continue
		}
		out = append(out, it)
		if it.id >= last {
			return out
		}
	}
}

// live waits for the ": live" comment and returns the events replayed before it.
func (c *client) live(t *testing.T) []item {
	t.Helper()
	var out []item
	deadline := time.Now().Add(waitFor)
	for {
		it := c.next(t, deadline)
		if it.comment == "live" {
			return out
		}
		if it.comment == "" {
			out = append(out, it)
		}
	}
}

func ids(items []item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.id
	}
	return out
}

func TestLiveDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	all := b.open(t, "/sse/events", openOptions{}).start()
	one := b.open(t, "/sse/deployments/"+b.a.String(), openOptions{}).start()
	require.Empty(t, all.live(t))
	require.Empty(t, one.live(t))

	first := b.insert(t, &b.a, "deployment.started", map[string]any{"name": "web"})
	second := b.insert(t, &b.b, "step.started", map[string]any{"step": "build", "position": 0})
	third := b.insert(t, nil, "target.registered", map[string]any{"target": "web-1"})
	fourth := b.insert(t, &b.a, "step.finished", map[string]any{"step": "build", "deployment_id": "spoofed"})

	got := all.events(t, 4)
	require.Equal(t, []int64{first, second, third, fourth}, ids(got))
	require.Equal(t, "deployment.started", got[0].typ)
	require.Equal(t, "web", got[0].data["name"])
	require.Equal(t, b.a.String(), got[0].data["deployment_id"])
	created, err := time.Parse(time.RFC3339Nano, got[0].data["created_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), created, time.Minute)
	require.Equal(t, map[string]any{"step": "build", "position": float64(0), "deployment_id": b.b.String(), "created_at": got[1].data["created_at"]}, got[1].data)
	require.Equal(t, "target.registered", got[2].typ)
	require.Nil(t, got[2].data["deployment_id"])
	require.Contains(t, got[2].data, "deployment_id")
	require.Equal(t, b.a.String(), got[3].data["deployment_id"], "the row's deployment wins over data")

	require.Equal(t, []int64{first, fourth}, ids(one.events(t, 2)))
}

func TestResumeDeliversEveryEventOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	const (
		total   = 400
		perConn = 30
	)
	// Events keep being inserted while the clients disconnect and come back: half of
	// them only after the clients have come back twice each.
	reconnected := make(chan struct{}, 100)
	type insertion struct {
		ids []int64
		err error
	}
	inserted := make(chan insertion, 1)
	go func() {
		var out []int64
		for i := range total {
			if i == total/2 {
				for range 4 {
					select {
					case <-reconnected:
					case <-time.After(waitFor):
						inserted <- insertion{err: errors.New("the clients did not reconnect")}
						return
					}
				}
			}
			dep := &b.a
			if i%3 == 0 {
				dep = &b.b
			}
			if err := schema.InsertEvent(b.ctx, b.pool, dep, "target.finished", map[string]any{"target": fmt.Sprintf("web-%d", i%5), "seq": i}); err != nil {
				inserted <- insertion{err: err}
				return
			}
		}
		events, err := schema.ReadEvents(b.ctx, b.pool, 0, math.MaxInt64, schema.EventFilter{}, 2*total)
		for _, e := range events {
			out = append(out, e.ID)
		}
		inserted <- insertion{ids: out, err: err}
	}()

	// follow reads path perConn events per connection, alternating the header and
	// the query parameter to resume from the last id it saw, until it has want events.
	type followed struct {
		items []item
		err   error
	}
	follow := func(path string, want int) followed {
		var got []item
		c, err := b.dial(t, path, openOptions{lastEventID: "0"})
		if err != nil {
			return followed{nil, err}
		}
		c.start()
		deadline := time.Now().Add(2 * waitFor)
		for conn := 1; ; conn++ {
			for range perConn {
				it, err := c.nextItem(deadline)
				if err != nil {
					return followed{got, fmt.Errorf("%d of %d events arrived: %w", len(got), want, err)}
				}
				if it.comment != "" {
					continue
				}
				got = append(got, it)
				if len(got) == want {
					c.cancel()
					return followed{got, nil}
				}
			}
			c.cancel()
			last := strconv.FormatInt(got[len(got)-1].id, 10)
			if conn%2 == 0 {
				c, err = b.dial(t, path, openOptions{lastEventID: last})
			} else {
				c, err = b.dial(t, path+"?last_event_id="+last, openOptions{})
			}
			if err != nil {
				return followed{got, err}
			}
			c.start()
			reconnected <- struct{}{}
		}
	}
	wantA := 0
	for i := range total {
		if i%3 != 0 {
			wantA++
		}
	}
	everything, deploymentA := make(chan followed, 1), make(chan followed, 1)
	go func() { everything <- follow("/sse/events", total) }()
	go func() { deploymentA <- follow("/sse/deployments/"+b.a.String(), wantA) }()

	ins := <-inserted
	require.NoError(t, ins.err)
	require.Len(t, ins.ids, total)
	all := <-everything
	require.NoError(t, all.err)
	require.Equal(t, ins.ids, ids(all.items))
	for i, it := range all.items {
		require.Equal(t, float64(i), it.data["seq"])
	}
	onlyA := <-deploymentA
	require.NoError(t, onlyA.err)
	var idsA []int64
	for i, id := range ins.ids {
		if i%3 != 0 {
			idsA = append(idsA, id)
		}
	}
	require.Equal(t, idsA, ids(onlyA.items))
}

func TestFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	a := b.a.String()
	paths := []string{
		"/sse/deployments/" + a,
		"/sse/events?deployment=" + a,
		"/sse/events?type=step.*",
		"/sse/events?type=step.started,deployment.*",
		"/sse/events?type=step.started&type=deployment.*",
		"/sse/events?target=web-1",
		"/sse/events?target=web-1,web-2",
		"/sse/events?deployment=" + a + "&type=step.*&target=web-1",
		"/sse/deployments/" + a + "?type=step.*&target=web-1",
	}
	clients := make([]*client, len(paths))
	for i, p := range paths {
		clients[i] = b.open(t, p, openOptions{}).start()
		clients[i].live(t)
	}
	type ev struct {
		dep    *uuid.UUID
		typ    string
		target string
	}
	evs := []ev{
		{&b.a, "deployment.started", ""},
		{&b.a, "step.started", "web-1"},
		{&b.a, "step.started", "web-2"},
		{&b.b, "step.started", "web-1"},
		{&b.b, "step.finished", "web-3"},
		{&b.a, "target.finished", "web-1"},
		{nil, "target.registered", "web-2"},
		{&b.b, "deployment.succeeded", ""},
		{&b.a, "step.started", "web-1"}, // matches every filter: ends each stream's check
	}
	var inserted []int64
	for _, e := range evs {
		data := map[string]any{}
		if e.target != "" {
			data["target"] = e.target
		}
		inserted = append(inserted, b.insert(t, e.dep, e.typ, data))
	}
	want := map[int][]int{ // path -> indexes into inserted
		0: {0, 1, 2, 5, 8},
		1: {0, 1, 2, 5, 8},
		2: {1, 2, 3, 4, 8},
		3: {0, 1, 2, 3, 7, 8},
		4: {0, 1, 2, 3, 7, 8},
		5: {1, 3, 5, 8},
		6: {1, 2, 3, 5, 6, 8},
		7: {1, 8},
		8: {1, 8},
	}
	fence := inserted[len(inserted)-1]
	for i, c := range clients {
		var wantIDs []int64
		for _, k := range want[i] {
			wantIDs = append(wantIDs, inserted[k])
		}
		require.Equal(t, wantIDs, ids(c.until(t, fence)), paths[i])
	}

	// A replay applies the same filters.
	for i, p := range paths {
		c := b.open(t, p, openOptions{lastEventID: strconv.FormatInt(inserted[0]-1, 10)}).start()
		var wantIDs []int64
		for _, k := range want[i] {
			wantIDs = append(wantIDs, inserted[k])
		}
		require.Equal(t, wantIDs, ids(c.live(t)), "replay of "+p)
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{handler: HandlerOptions{KeepAlive: 20 * time.Millisecond}})
	c := b.open(t, "/sse/events", openOptions{}).start()
	c.live(t)
	for range 2 {
		require.Equal(t, item{comment: "keep-alive"}, c.next(t))
	}
	// Events still flow between keep-alives.
	id := b.insert(t, nil, "target.registered", map[string]any{})
	require.Equal(t, []int64{id}, ids(c.events(t, 1)))
}

func TestSlowClientIsCutOffWithoutSlowingOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{
		broker: BrokerOptions{SubscriberBuffer: 32},
		// Only the cut-off may end the slow stream, not a write timing out.
		handler:      HandlerOptions{WriteTimeout: time.Hour},
		smallBuffers: true,
	})
	fast := b.open(t, "/sse/events", openOptions{}).start()
	fast.live(t)
	slow := b.open(t, "/sse/events", openOptions{smallReceiveBuffer: true})
	it, err := slow.read()
	require.NoError(t, err)
	require.Equal(t, "live", it.comment)
	// slow reads nothing more for now.

	padding := strings.Repeat("x", 2048)
	var all []int64
	for range 20 {
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		var round []int64
		for range 20 {
			round = append(round, insertIn(t, tx, &b.a, "target.output", map[string]any{"output": padding}))
		}
		require.NoError(t, tx.Commit(b.ctx))
		require.Equal(t, round, ids(fast.until(t, round[len(round)-1])))
		all = append(all, round...)
	}
	require.Eventually(t, func() bool {
		b.broker.mu.Lock()
		defer b.broker.mu.Unlock()
		return len(b.broker.subs) == 1
	}, waitFor, 10*time.Millisecond, "the slow stream is dropped")

	// What the slow client finds: a prefix of the events, then a connection closed
	// in the middle of the response (the server was blocked writing to it).
	slow.start()
	var got []int64
	deadline := time.Now().Add(waitFor)
	for {
		it, err := slow.nextItem(deadline)
		if err != nil {
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			break
		}
		if it.comment == "" {
			got = append(got, it.id)
		}
	}
	require.NotEmpty(t, got)
	require.Less(t, len(got), len(all))
	require.Equal(t, all[:len(got)], got)

	// It resumes where it was cut off and gets the rest exactly once.
	resumed := b.open(t, "/sse/events", openOptions{lastEventID: strconv.FormatInt(got[len(got)-1], 10)}).start()
	require.Equal(t, all[len(got):], ids(resumed.live(t)))
}

func TestEventCommittedAfterAHigherIDIsDeliveredInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	live := b.open(t, "/sse/events", openOptions{}).start()
	live.live(t)
	n := b.insert(t, &b.a, "deployment.started", map[string]any{})
	require.Equal(t, []int64{n}, ids(live.events(t, 1)))

	// A transaction draws id n+1, and n+2 commits before it.
	slowTx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer slowTx.Rollback(b.ctx)
	late := insertIn(t, slowTx, &b.a, "step.started", map[string]any{})
	early := b.insert(t, &b.a, "step.finished", map[string]any{})
	require.Equal(t, n+1, late)
	require.Equal(t, n+2, early)
	require.Eventually(t, func() bool { return b.broker.holding.Load() == late }, waitFor, 5*time.Millisecond)

	resumed := b.open(t, "/sse/events", openOptions{lastEventID: strconv.FormatInt(n, 10)}).start()
	require.Empty(t, resumed.live(t))
	require.NoError(t, slowTx.Commit(b.ctx))
	require.Equal(t, []int64{late, early}, ids(live.events(t, 2)))
	require.Equal(t, []int64{late, early}, ids(resumed.events(t, 2)))

	// An id whose transaction rolls back is skipped once that transaction has ended.
	abandoned, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer abandoned.Rollback(b.ctx)
	gone := insertIn(t, abandoned, &b.a, "step.started", map[string]any{})
	after := b.insert(t, &b.a, "step.finished", map[string]any{})
	require.Eventually(t, func() bool { return b.broker.holding.Load() == gone }, waitFor, 5*time.Millisecond)
	require.NoError(t, abandoned.Rollback(b.ctx))
	require.Equal(t, []int64{after}, ids(live.events(t, 1)))
	require.Equal(t, []int64{after}, ids(resumed.events(t, 1)))
	require.Eventually(t, func() bool { return b.broker.holding.Load() == 0 }, waitFor, 5*time.Millisecond)
}

func TestWriterOpenPastMaxHoldStopsHoldingTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{broker: BrokerOptions{MaxHold: 100 * time.Millisecond}})
	live := b.open(t, "/sse/events", openOptions{}).start()
	live.live(t)
	before := b.insert(t, nil, "target.registered", map[string]any{})
	require.Equal(t, []int64{before}, ids(live.events(t, 1)))

	stuck, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer stuck.Rollback(b.ctx)
	late := insertIn(t, stuck, nil, "target.registered", map[string]any{})
	next := b.insert(t, nil, "target.registered", map[string]any{})
	require.Equal(t, []int64{next}, ids(live.events(t, 1)))

	// Once it commits, a client resuming from before it still gets it, in order.
	require.NoError(t, stuck.Commit(b.ctx))
	resumed := b.open(t, "/sse/events", openOptions{lastEventID: strconv.FormatInt(before, 10)}).start()
	require.Equal(t, []int64{late, next}, ids(resumed.live(t)))
}

func TestBrokerStartWaitsForWritersInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{deferStart: true})
	first := b.insert(t, &b.a, "deployment.started", map[string]any{})
	inFlight, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer inFlight.Rollback(b.ctx)
	late := insertIn(t, inFlight, &b.a, "step.started", map[string]any{})
	latest := b.insert(t, &b.a, "step.finished", map[string]any{})

	b.run()
	require.Eventually(t, func() bool { return b.broker.holding.Load() == latest }, waitFor, 5*time.Millisecond)
	c := b.open(t, "/sse/events", openOptions{lastEventID: strconv.FormatInt(first, 10)}).start()
	require.NoError(t, inFlight.Commit(b.ctx))
	require.Equal(t, []int64{late, latest}, ids(c.live(t)))
	next := b.insert(t, &b.a, "step.finished", map[string]any{})
	require.Equal(t, []int64{next}, ids(c.events(t, 1)))
}

func TestBrokerStopEndsStreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pool := testenv.MigratedPool(t)
	broker := NewBroker(BrokerOptions{DB: pool, PollInterval: 10 * time.Millisecond})
	stopped := make(chan error)
	go func() { stopped <- broker.Run(ctx) }()
	srv := httptest.NewServer(NewHandler(broker, HandlerOptions{}))
	t.Cleanup(srv.Close)
	b := &bundle{ctx: context.Background(), srv: srv}
	c := b.open(t, "/sse/events", openOptions{}).start()
	c.live(t)
	cancel()
	require.NoError(t, <-stopped)
	_, ok := <-c.items
	require.False(t, ok)
	c.mu.Lock()
	require.ErrorIs(t, c.err, io.EOF)
	c.mu.Unlock()

	resp, err := http.Get(srv.URL + "/sse/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestBadParametersAreRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	cases := []struct {
		path, lastEventID string
		fields            []string
	}{
		{path: "/sse/events?deployment=nope", fields: []string{"deployment"}},
		{path: "/sse/events?deployment=" + b.a.String() + "&deployment=" + b.b.String(), fields: []string{"deployment"}},
		{path: "/sse/events?type=deploy", fields: []string{"type"}},
		{path: "/sse/events?type=step.*,", fields: []string{"type"}},
		{path: "/sse/events?type=*", fields: []string{"type"}},
		{path: "/sse/events?type=step.Started", fields: []string{"type"}},
		{path: "/sse/events?target=web%201", fields: []string{"target"}},
		{path: "/sse/events?last_event_id=-1", fields: []string{"last_event_id"}},
		{path: "/sse/events?last_event_id=abc", fields: []string{"last_event_id"}},
		{path: "/sse/events?last_event_id=", fields: []string{"last_event_id"}},
		{path: "/sse/events", lastEventID: "x", fields: []string{"Last-Event-ID"}},
		{path: "/sse/events?types=step.*", fields: []string{"types"}},
		{path: "/sse/events?deployment=x&type=y&target=-z", fields: []string{"deployment", "type", "target"}},
		{path: "/sse/deployments/not-a-uuid", fields: []string{"id"}},
		{path: "/sse/deployments/" + b.a.String() + "?deployment=" + b.b.String(), fields: []string{"deployment"}},
		{path: "/sse/deployments/nope?type=x", fields: []string{"id", "type"}},
	}
	for _, c := range cases {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+c.path, nil)
		require.NoError(t, err)
		if c.lastEventID != "" {
			req.Header.Set("Last-Event-ID", c.lastEventID)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body api.ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, c.path)
		require.Equal(t, api.ProblemContentType, resp.Header.Get("Content-Type"))
		require.Equal(t, api.CodeInvalidArgument, body.Error.Code)
		var fields []string
		for _, f := range body.Error.Fields {
			fields = append(fields, f.Field)
			require.NotEmpty(t, f.Problem)
		}
		require.ElementsMatch(t, c.fields, fields, c.path)
	}

	resp, err := http.Get(b.srv.URL + "/sse/nothing")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestFrameCarriesNonObjectData(t *testing.T) {
	t.Parallel()
	created := time.Date(2031, 2, 3, 4, 5, 6, 7, time.FixedZone("x", 3600))
	f := newFrame(schema.Event{ID: 42, Type: "target.output", Data: json.RawMessage(`["a", "b"]`), CreatedAt: created})
	require.Equal(t, "id: 42\nevent: target.output\ndata: {\"created_at\":\"2031-02-03T03:05:06.000000007Z\",\"data\":[\"a\",\"b\"],\"deployment_id\":null}\n\n", string(f.bytes))
	require.Equal(t, "", f.target)
	require.Equal(t, "12", newFrame(schema.Event{Data: json.RawMessage(`{"target": 12}`)}).target)
	require.Equal(t, "web-1", newFrame(schema.Event{Data: json.RawMessage(`{"target": "web-1"}`)}).target)
	require.False(t, filter{targets: []string{"web-1"}}.matches(newFrame(schema.Event{Data: json.RawMessage(`{}`)})))
}

func TestNotifyReadsTheLogAtOnce(t *testing.T) {
	t.Parallel()
	notify := make(chan struct{}, 1)
	b := setup(t, setupOptions{broker: BrokerOptions{PollInterval: time.Hour, IdleInterval: time.Hour, Notify: notify}})
	c := b.open(t, "/sse/events", openOptions{}).start()
	c.live(t)
	id := b.insert(t, nil, "target.registered", map[string]any{})
	notify <- struct{}{}
	require.Equal(t, []int64{id}, ids(c.events(t, 1)))
}
