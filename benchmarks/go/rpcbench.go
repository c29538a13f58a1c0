// rpcbench: the benchmarks' request/reply job in Go on amqp091-go, RabbitMQ's own Go client.
//
// The same job as Gear's: a topic exchange, the request routed by key to the server's queue, the reply
// routed by key to the caller's queue, publisher confirms and mandatory on requests and replies, manual
// acks (the server acks a request once its reply is confirmed, as Gear's does; serve-ack-at-publish acks
// it as soon as the reply is published, the lighter shape). Built by benchmarks/gobench.py from
// Debian's packages (golang-go, golang-github-rabbitmq-amqp091-go-dev) in GOPATH mode.
//
// Confirms are read from NotifyPublish, each publish numbered under a lock before it is sent: Debian's
// amqp091-go 1.5.0 registers a DeferredConfirmation after sending, so a fast ack can find nothing and
// its Wait never returns (a race fixed in later releases).
//
//	rpcbench serve  URL EXCHANGE KEY          prints "ready", then serves until stdin closes
//	rpcbench serve-ack-at-publish URL EXCHANGE KEY   the same, acking each request when its reply is sent
//	rpcbench serve-gear-envelope URL EXCHANGE KEY    serve, its replies in Gear's envelope (see below)
//	rpcbench client URL EXCHANGE SERVER_KEY   prints "ready", then answers commands on stdin:
//	    call            one call; prints {"latency_ns": N}
//	    load C MILLIS   C calls in flight for MILLIS ms; prints {"in_time": N, "latencies_ns": [...], "cpu_ns": N}
//	    trace MILLIS    one call in flight for MILLIS ms; prints {"calls": [[id, start, published, reply, end], ...]}
//	rpcbench client-gear-envelope URL EXCHANGE SERVER_KEY   client, its requests in Gear's envelope
//
// Gear's envelope is what a Gear caller and server put on the wire beside the body, so the broker
// handles the same bytes: a request carries the message type, the sender's id, delivery mode 1, an
// expiration (the call's deadline, 30 s) and the headers x-gear-method, x-gear-trace (32 hex digits),
// x-gear-deadline (unix ms), x-gear-hedge and x-gear-hedge-after (a call to one instance); a reply its
// type, sender, message id, delivery mode and x-gear-method. The plain shapes send only the content
// type, the ids and reply-to.
//
// With RPCBENCH_TRACE=FILE in its environment, the server records for each request its id, when its
// delivery came out of amqp091-go's channel and when the reply's publish returned, and writes them to
// FILE as JSON ({"requests": [[id, got, published], ...]}) when stdin closes.
// Times are CLOCK_MONOTONIC in ns (Python's time.monotonic_ns), read only while tracing: a trace's
// call is stamped when it starts, when its request's publish returned (the frames are written), when
// its reply came out of amqp091-go's channel, and when it returns.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	amqp "github.com/rabbitmq/amqp091-go"
)

var payload = []byte(`{"data":"` + strings.Repeat("x", 80) + `"}`)

// envelope: requests and replies carry Gear's envelope (the *-gear-envelope commands).
var envelope bool

// callTimeout is the deadline a Gear-enveloped request carries (expiration and x-gear-deadline):
// Gear's default call timeout.
const callTimeout = 30 * time.Second

// traceID is a fresh 32-hex-digit trace id, as a Gear caller puts in x-gear-trace.
func traceID(n uint64) string {
	return fmt.Sprintf("%016x%016x", uint64(time.Now().UnixNano()), n|1)
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "rpcbench:", err)
		os.Exit(1)
	}
}

// publisher sends confirmed publishes and calls each one's callback with the broker's verdict.
type publisher struct {
	ch      *amqp.Channel
	mu      sync.Mutex
	seq     uint64
	waiting map[uint64]func(bool)
}

func open(url, exchange string) *publisher {
	conn, err := amqp.Dial(url)
	must(err)
	ch, err := conn.Channel()
	must(err)
	must(ch.ExchangeDeclare(exchange, "topic", false, true, false, false, nil))
	must(ch.Confirm(false))
	p := &publisher{ch: ch, waiting: map[uint64]func(bool){}}
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 4096))
	go func() {
		for c := range confirms {
			p.mu.Lock()
			done := p.waiting[c.DeliveryTag]
			delete(p.waiting, c.DeliveryTag)
			p.mu.Unlock()
			if done != nil {
				done(c.Ack)
			}
		}
	}()
	returns := ch.NotifyReturn(make(chan amqp.Return, 64))
	go func() {
		for r := range returns {
			fmt.Fprintln(os.Stderr, "rpcbench: returned", r.RoutingKey)
		}
	}()
	return p
}

// publish sends one mandatory publish; done runs with the verdict.
func (p *publisher) publish(exchange, key string, msg amqp.Publishing, done func(bool)) {
	p.mu.Lock()
	p.seq++
	p.waiting[p.seq] = done
	err := p.ch.Publish(exchange, key, true, false, msg)
	p.mu.Unlock()
	must(err)
}

// monotonic is CLOCK_MONOTONIC in ns, the clock of the Gear processes' stamps.
func monotonic() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func queueFor(ch *amqp.Channel, exchange, key string) string {
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	must(err)
	must(ch.QueueBind(q.Name, key, exchange, false, nil))
	return q.Name
}

// exitWithStdin runs last, then exits, once stdin closes.
func exitWithStdin(last func()) {
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				last()
				os.Exit(0)
			}
		}
	}()
}

// serve answers each request with a confirmed, mandatory reply. ackAtPublish false: the request is acked
// when the broker confirms the reply (a reply lost with the server's link is asked again: Gear's job);
// true: it is acked at once when the reply is published (lighter: a reply lost in flight is lost).
func serve(url, exchange, key string, ackAtPublish bool) {
	p := open(url, exchange)
	ch := p.ch
	must(ch.Qos(256, 0, false))
	queue := queueFor(ch, exchange, key)
	deliveries, err := ch.Consume(queue, "", false, true, false, false, nil)
	must(err)
	fmt.Println("ready")
	trace := os.Getenv("RPCBENCH_TRACE")
	var mu sync.Mutex
	var requests [][3]int64
	exitWithStdin(func() {
		if trace == "" {
			return
		}
		mu.Lock()
		data, err := json.Marshal(map[string]any{"requests": requests})
		mu.Unlock()
		must(err)
		must(os.WriteFile(trace, data, 0o644))
	})
	for d := range deliveries {
		var got int64
		if trace != "" {
			got = monotonic()
		}
		request := d
		reply := amqp.Publishing{ContentType: "application/json", CorrelationId: d.CorrelationId, Body: d.Body}
		if envelope {
			reply.DeliveryMode = amqp.Transient
			reply.Type = "gear.reply"
			reply.AppId = key
			reply.MessageId = d.CorrelationId
			reply.Headers = amqp.Table{"x-gear-method": "echo"}
		}
		if ackAtPublish {
			p.publish(exchange, d.ReplyTo, reply, func(bool) {})
			must(request.Ack(false))
		} else {
			p.publish(exchange, d.ReplyTo, reply, func(bool) { must(request.Ack(false)) })
		}
		if trace != "" {
			published := monotonic()
			id, _ := strconv.ParseInt(d.CorrelationId, 16, 64)
			mu.Lock()
			requests = append(requests, [3]int64{id, got, published})
			mu.Unlock()
		}
	}
}

type client struct {
	pub      *publisher
	exchange string
	target   string
	replyKey string
	mu       sync.Mutex
	waiting  map[string]chan int64
	nextID   uint64
	tracing  atomic.Bool
}

// call makes one call; with tracing on, it returns [id, start, published, reply, end] (see the top).
func (c *client) call() [5]int64 {
	var stamps [5]int64
	tracing := c.tracing.Load()
	if tracing {
		stamps[1] = monotonic()
	}
	n := atomic.AddUint64(&c.nextID, 1)
	id := strconv.FormatUint(n, 16)
	done := make(chan int64, 1)
	confirmed := make(chan bool, 1)
	c.mu.Lock()
	c.waiting[id] = done
	c.mu.Unlock()
	request := amqp.Publishing{
		ContentType: "application/json", CorrelationId: id, MessageId: id, ReplyTo: c.replyKey, Body: payload,
	}
	if envelope {
		request.DeliveryMode = amqp.Transient
		request.Type = "gear.call"
		request.AppId = c.replyKey
		request.Expiration = strconv.FormatInt(callTimeout.Milliseconds(), 10)
		request.Headers = amqp.Table{
			"x-gear-method":      "echo",
			"x-gear-trace":       traceID(n),
			"x-gear-deadline":    time.Now().Add(callTimeout).UnixMilli(),
			"x-gear-hedge":       int32(0),
			"x-gear-hedge-after": int32(1000),
		}
	}
	c.pub.publish(c.exchange, c.target, request, func(ack bool) { confirmed <- ack })
	if tracing {
		stamps[2] = monotonic()
	}
	if !<-confirmed {
		fmt.Fprintln(os.Stderr, "rpcbench: nacked")
	}
	stamps[3] = <-done
	if tracing {
		stamps[0] = int64(n)
		stamps[4] = monotonic()
	}
	return stamps
}

func (c *client) replies(deliveries <-chan amqp.Delivery) {
	for d := range deliveries {
		c.mu.Lock()
		done := c.waiting[d.CorrelationId]
		delete(c.waiting, d.CorrelationId)
		c.mu.Unlock()
		var read int64
		if c.tracing.Load() {
			read = monotonic()
		}
		must(d.Ack(false))
		if done != nil {
			done <- read
		}
	}
}

func cpuNanos() int64 {
	var u syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &u))
	return u.Utime.Nano() + u.Stime.Nano()
}

func (c *client) load(concurrency int, span time.Duration) map[string]any {
	end := time.Now().Add(span)
	var mu sync.Mutex
	latencies := make([]int64, 0, 4096)
	inTime := 0
	cpu0 := cpuNanos()
	var wg sync.WaitGroup
	for i := 0; i < concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t0 := time.Now()
				c.call()
				took := time.Since(t0).Nanoseconds()
				mu.Lock()
				latencies = append(latencies, took)
				if !time.Now().After(end) {
					inTime++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return map[string]any{"in_time": inTime, "latencies_ns": latencies, "cpu_ns": cpuNanos() - cpu0}
}

// trace makes one call after another for span, each call's stamps recorded.
func (c *client) trace(span time.Duration) map[string]any {
	c.tracing.Store(true)
	defer c.tracing.Store(false)
	end := time.Now().Add(span)
	calls := make([][5]int64, 0, 1<<14)
	for time.Now().Before(end) {
		calls = append(calls, c.call())
	}
	return map[string]any{"calls": calls}
}

func runClient(url, exchange, target string) {
	p := open(url, exchange)
	ch := p.ch
	must(ch.Qos(512, 0, false))
	replyKey := fmt.Sprintf("GOCLIENT.c%d", os.Getpid())
	queue := queueFor(ch, exchange, replyKey)
	deliveries, err := ch.Consume(queue, "", false, true, false, false, nil)
	must(err)
	c := &client{pub: p, exchange: exchange, target: target, replyKey: replyKey, waiting: map[string]chan int64{}}
	go c.replies(deliveries)
	fmt.Println("ready")
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		switch {
		case len(words) == 1 && words[0] == "call":
			t0 := time.Now()
			c.call()
			must(out.Encode(map[string]int64{"latency_ns": time.Since(t0).Nanoseconds()}))
		case len(words) == 3 && words[0] == "load":
			concurrency, err := strconv.Atoi(words[1])
			must(err)
			millis, err := strconv.Atoi(words[2])
			must(err)
			must(out.Encode(c.load(concurrency, time.Duration(millis)*time.Millisecond)))
		case len(words) == 2 && words[0] == "trace":
			millis, err := strconv.Atoi(words[1])
			must(err)
			must(out.Encode(c.trace(time.Duration(millis) * time.Millisecond)))
		default:
			fmt.Fprintln(os.Stderr, "rpcbench: unknown command", words)
			os.Exit(2)
		}
	}
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: rpcbench serve[-ack-at-publish|-gear-envelope]|client[-gear-envelope] URL EXCHANGE KEY")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2], os.Args[3], os.Args[4], false)
	case "serve-ack-at-publish":
		serve(os.Args[2], os.Args[3], os.Args[4], true)
	case "serve-gear-envelope":
		envelope = true
		serve(os.Args[2], os.Args[3], os.Args[4], false)
	case "client":
		runClient(os.Args[2], os.Args[3], os.Args[4])
	case "client-gear-envelope":
		envelope = true
		runClient(os.Args[2], os.Args[3], os.Args[4])
	default:
		os.Exit(2)
	}
}
