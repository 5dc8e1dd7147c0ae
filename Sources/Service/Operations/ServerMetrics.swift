import CoreMetrics
import JSONRPC
import Foundation
import Prometheus

/// The server's metrics, recorded through swift-metrics and rendered in the Prometheus
/// text format by swift-prometheus, for the operations listener's `GET /metrics`.
///
/// Each figure is recorded in one place, where the server already counts it: RPC calls
/// where the dispatcher answers them (`Server.callAnswered`), connections where they are
/// adopted and closed, requests where the access log hears of them (`Server.finished`).
/// The gauges that the server's tables already know (requests in flight, open sockets,
/// paused transfers) are read from those tables when a scrape asks (`Server.metricsText`),
/// so there is no second count of them to drift.
///
/// The registry belongs to this server (not swift-metrics' global `MetricsSystem`), so
/// several servers in one process (the Swift tests) keep their figures apart. Every
/// metric lives on the loop's thread; swift-prometheus's own locks make the rendering
/// safe anyway.
final class ServerMetrics {
    static let prefix = "xhrpc_"
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory

    /// The calls counters by method (`RPCMethod.number`; names that are not a declared
    /// method share `unknownCalls`), then outcome: a call found by its method's number
    /// and answered `ok`, nearly all of them, is counted without hashing a string.
    private var calls: [CallCounters] = []
    private var unknownCalls = CallCounters()

    private struct CallCounters {
        var ok: CoreMetrics.Counter?
        var failed: [String: CoreMetrics.Counter] = [:]
    }
    /// The requests counters by outcome, a handful of words: found by comparing short
    /// strings in a small array, not by hashing (about 300 instructions a request).
    private var requests: [(outcome: String, counter: CoreMetrics.Counter)] = []
    private var connectionsTotal: [String: CoreMetrics.Counter] = [:]
    private var connectionsOpen: [String: CoreMetrics.Gauge] = [:]
    private var openConnections: [String: Int] = [:]
    /// The transport of each connection counted as open, by connection id.
    private var transportOf: [UInt64: String] = [:]
    private let bodyBytesIn: CoreMetrics.Counter
    private let bodyBytesOut: CoreMetrics.Counter
    private let requestDuration: CoreMetrics.Timer
    private let loopLag: CoreMetrics.Timer
    let requestsInFlight: CoreMetrics.Gauge
    let socketsOpen: CoreMetrics.Gauge
    /// Transfers paused for any reason: by their client (`pause`) or for lack of room
    /// (`TransferEngine.pausedTransferCount`).
    let transfersPaused: CoreMetrics.Gauge

    /// The transports a connection is counted under.
    static let transports = ["unix", "tcp", "tls"]

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        let p = Self.prefix
        // Requests take from milliseconds to minutes; the loop should be late by well
        // under a millisecond, and anything past 100 ms is a stall someone must look at.
        factory.durationHistogramBuckets[p + "request_duration_seconds"] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
            .seconds(30), .seconds(60),
        ]
        factory.durationHistogramBuckets[p + "event_loop_lag_seconds"] = [
            .microseconds(100), .microseconds(500), .milliseconds(1), .milliseconds(5), .milliseconds(10),
            .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1),
        ]
        self.factory = factory
        bodyBytesIn = CoreMetrics.Counter(label: p + "body_bytes_total", dimensions: [("direction", "in")], factory: factory)
        bodyBytesOut = CoreMetrics.Counter(label: p + "body_bytes_total", dimensions: [("direction", "out")], factory: factory)
        requestDuration = CoreMetrics.Timer(label: p + "request_duration_seconds", factory: factory)
        loopLag = CoreMetrics.Timer(label: p + "event_loop_lag_seconds", factory: factory)
        requestsInFlight = CoreMetrics.Gauge(label: p + "requests_in_flight", factory: factory)
        socketsOpen = CoreMetrics.Gauge(label: p + "sockets_open", factory: factory)
        transfersPaused = CoreMetrics.Gauge(label: p + "transfers_paused", factory: factory)
        // Every transport shows from the start, at 0, so a rate over it is defined.
        for t in Self.transports {
            _ = connectionCounter(t)
            connectionGauge(t).record(0)
        }
    }

    /// One RPC call answered: `outcome` is `ok` or the error's word (`RPCError.kind`).
    /// `method` is the declared method, or nil for a name that is not one (counted as
    /// `unknown`, so that a client cannot grow the label set without bound).
    func callAnswered(method: RPCMethod?, outcome: String) {
        guard let method else { return count(&unknownCalls, method: "unknown", outcome: outcome) }
        if method.number >= calls.count {
            calls += Array(repeating: CallCounters(), count: method.number + 1 - calls.count)
        }
        count(&calls[method.number], method: method.name, outcome: outcome)
    }

    private func count(_ counters: inout CallCounters, method: String, outcome: String) {
        func made() -> CoreMetrics.Counter {
            CoreMetrics.Counter(label: Self.prefix + "rpc_calls_total",
                                dimensions: [("method", method), ("outcome", outcome)], factory: factory)
        }
        if outcome == "ok" {
            let c = counters.ok ?? made()
            counters.ok = c
            c.increment()
        } else {
            let c = counters.failed[outcome] ?? made()
            counters.failed[outcome] = c
            c.increment()
        }
    }

    func connectionOpened(id: UInt64, transport: String) {
        transportOf[id] = transport
        connectionCounter(transport).increment()
        openConnections[transport, default: 0] += 1
        connectionGauge(transport).record(openConnections[transport, default: 0])
    }

    /// A connection counted by `connectionOpened` ended; others are ignored.
    func connectionClosed(id: UInt64) {
        guard let transport = transportOf.removeValue(forKey: id) else { return }
        openConnections[transport, default: 1] -= 1
        connectionGauge(transport).record(openConnections[transport, default: 0])
    }

    /// One HTTP request finished: `outcome` is its status class (`2xx`…`5xx`) or, with no
    /// response, its failure's reason word.
    func requestFinished(outcome: String, bytesIn: Int, bytesOut: Int, durationMs: Int) {
        let c: CoreMetrics.Counter
        if let made = requests.first(where: { $0.outcome == outcome }) {
            c = made.counter
        } else {
            c = CoreMetrics.Counter(label: Self.prefix + "requests_total", dimensions: [("outcome", outcome)], factory: factory)
            requests.append((outcome, c))
        }
        c.increment()
        if bytesIn > 0 { bodyBytesIn.increment(by: bytesIn) }
        if bytesOut > 0 { bodyBytesOut.increment(by: bytesOut) }
        requestDuration.recordMilliseconds(max(0, durationMs))
    }

    /// How late the loop's lag timer fired.
    func loopWasLate(nanoseconds: Int64) {
        loopLag.recordNanoseconds(max(0, nanoseconds))
    }

    /// The registry in the Prometheus text format (version 0.0.4).
    func render() -> [UInt8] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }

    private func connectionCounter(_ transport: String) -> CoreMetrics.Counter {
        if let c = connectionsTotal[transport] { return c }
        let c = CoreMetrics.Counter(label: Self.prefix + "connections_total", dimensions: [("transport", transport)],
                                    factory: factory)
        connectionsTotal[transport] = c
        return c
    }

    private func connectionGauge(_ transport: String) -> CoreMetrics.Gauge {
        if let g = connectionsOpen[transport] { return g }
        let g = CoreMetrics.Gauge(label: Self.prefix + "connections", dimensions: [("transport", transport)], factory: factory)
        connectionsOpen[transport] = g
        return g
    }
}
