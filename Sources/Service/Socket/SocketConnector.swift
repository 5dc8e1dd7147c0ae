import EventLoop
import Foundation
import HTTPEngine
import SecureStream

/// Why a socket could not be made or broke: a stable word for programs (`socket.onErr`'s
/// `error`) and a sentence for people.
struct SocketFailure: Error, Equatable {
    /// refused, timeout, resolve, unreachable, tls, policy_denied, proxy, reset or io.
    let word: String
    let message: String

    /// The word for a libuv error of connecting, reading or writing.
    static func from(_ error: UVError, _ what: String) -> SocketFailure {
        let word = switch error.name {
        case "ECONNREFUSED": "refused"
        case "ETIMEDOUT": "timeout"
        case "ENETUNREACH", "EHOSTUNREACH": "unreachable"
        case "ECONNRESET", "EPIPE", "ECONNABORTED": "reset"
        default: "io"
        }
        return SocketFailure(word: word, message: "\(what): \(error.message)")
    }
}

/// What a raw socket needs to make its stream: where to, how to check it, and how long
/// it may take.
struct SocketDestination {
    var host: String
    var port: Int
    /// TLS on top of TCP, with these checks.
    var tls: Bool
    var verifyPeer = true
    var verifyHost = true
    /// Milliseconds for the whole of it: lookup, connect, proxy tunnel and handshake.
    var timeoutMs: UInt64
    /// Tunnel through this HTTP proxy (HTTP CONNECT) instead of connecting directly.
    var proxy: ProxySettings?
}

/// Makes one raw socket's stream, on the loop, step by step, never blocking:
/// 1. looks up the host (or the proxy's), on libuv's thread pool (`Resolver`);
/// 2. asks the egress policy about every address found (`EgressPolicy.checkAddress`,
///    the check the HTTP engine makes in libcurl's open-socket callback) and connects
///    only to allowed ones, in the system's order, until one answers: a denied address
///    never receives a packet, and since the address checked is the one connected to,
///    DNS rebinding cannot slip past;
/// 3. through the egress proxy, sends `CONNECT host:port` and reads the answer head;
/// 4. for TLS, runs the handshake (`TLSStream` with the server's client context: its CA
///    file, `--tls-min`, SNI, and the socket's verification switches).
/// The host rules (`EgressPolicy.checkDestination`) are the caller's, before it starts.
/// Everything is bounded by the destination's timeout. `done` runs once, from the loop,
/// unless `cancel` came first; after `cancel` nothing is left open.
final class SocketConnector {
    typealias Completion = (Result<(stream: any ByteStream, early: [UInt8]), SocketFailure>) -> Void

    /// The longest proxy answer head read before giving up on it.
    static let maxProxyHead = 16 * 1024

    private let loop: Loop
    private let destination: SocketDestination
    private let policy: EgressPolicy?
    private let tlsContext: () throws -> TLSContext
    private var done: Completion?
    private let timer: EventLoop.Timer
    private var lookup: Resolver?
    /// The stream being connected, tunnelled or wrapped, closed on failure or cancel.
    private var attempt: (any ByteStream)?
    private var candidates: [String] = []
    private var lastFailure: SocketFailure?
    private let startedAt: UInt64

    /// `tlsContext` gives the server's client context (made on first use).
    init(loop: Loop, destination: SocketDestination, policy: EgressPolicy?,
         tlsContext: @escaping () throws -> TLSContext) throws {
        self.loop = loop
        self.destination = destination
        self.policy = policy
        self.tlsContext = tlsContext
        timer = try EventLoop.Timer(loop: loop)
        startedAt = loop.now
    }

    private var dialHost: String { destination.proxy?.host ?? destination.host }
    private var dialPort: Int { destination.proxy?.port ?? destination.port }
    private var place: String { Self.endpoint(destination.host, destination.port) }

    func start(_ done: @escaping Completion) {
        self.done = done
        timer.start(timeout: destination.timeoutMs) { [unowned self] in
            fail(SocketFailure(word: "timeout", message: "Connection to \(place) timed out after \(destination.timeoutMs) ms"))
        }
        let host = dialHost
        lookup = Resolver.resolve(loop: loop, host: host) { [unowned self] result in
            lookup = nil
            switch result {
            case .failure:
                let what = destination.proxy == nil ? "host" : "proxy"
                fail(SocketFailure(word: "resolve", message: "Could not resolve \(what): \(host)"))
            case .success(let addresses):
                admit(addresses)
            }
        }
    }

    /// Gives up: closes what is open; `done` is not called.
    func cancel() {
        done = nil
        finish()
    }

    // MARK: Steps

    private func admit(_ addresses: [String]) {
        guard let policy else {
            candidates = addresses
            return connectNext()
        }
        var denied: [String] = []
        for text in addresses {
            guard let address = IPAddress.parseLiteral(text) else { continue }
            if case let .denied(reason) = policy.checkAddress(address, port: dialPort) {
                denied.append(reason)
            } else {
                candidates.append(text)
            }
        }
        guard !candidates.isEmpty else {
            let target = Self.endpoint(dialHost, dialPort)
            return fail(SocketFailure(word: "policy_denied",
                                      message: "Denied by egress policy: every address tried for \(target) is denied: " + denied.joined(separator: " ")))
        }
        connectNext()
    }

    private func connectNext() {
        guard done != nil else { return }
        guard !candidates.isEmpty else {
            return fail(lastFailure ?? SocketFailure(word: "io", message: "Could not connect to \(place)"))
        }
        let address = candidates.removeFirst()
        let target = Self.endpoint(address, dialPort)
        attempt = Stream.connectTCP(loop: loop, host: address, port: dialPort) { [unowned self] result in
            guard done != nil else {
                if case .success(let s) = result { s.close() }
                return
            }
            switch result {
            case .failure(let error):
                attempt = nil
                lastFailure = SocketFailure.from(error, "Could not connect to \(target)")
                connectNext()
            case .success(let stream):
                attempt = stream
                if let proxy = destination.proxy {
                    tunnel(stream, through: proxy)
                } else {
                    established(stream, early: [])
                }
            }
        }
    }

    /// Asks the proxy for a tunnel; bytes after its answer head belong to the peer.
    private func tunnel(_ stream: EventLoop.Stream, through proxy: ProxySettings) {
        let target = Self.endpoint(destination.host, destination.port)
        var head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let user = proxy.user {
            let token = Data("\(user):\(proxy.password ?? "")".utf8).base64EncodedString()
            head += "Proxy-Authorization: Basic \(token)\r\n"
        }
        head += "\r\n"
        stream.write(Array(head.utf8))
        var answer: [UInt8] = []
        let proxyName = Self.endpoint(proxy.host, proxy.port)
        do {
            try stream.startReading { [unowned self] event in
                guard done != nil else { return }
                switch event {
                case .data(let bytes):
                    answer.append(contentsOf: bytes)
                    guard let end = Self.headEnd(answer) else {
                        if answer.count > Self.maxProxyHead {
                            fail(SocketFailure(word: "proxy", message: "The proxy \(proxyName) sent an answer head over \(Self.maxProxyHead) bytes"))
                        }
                        return
                    }
                    stream.stopReading()
                    let statusLine = String(decoding: answer[..<(answer.firstIndex(of: 13) ?? end)], as: UTF8.self)
                    let parts = statusLine.split(separator: " ", maxSplits: 2)
                    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]), (200..<300).contains(code) else {
                        return fail(SocketFailure(word: "proxy", message: "The proxy \(proxyName) refused CONNECT \(target): \(statusLine.prefix(200))"))
                    }
                    let early = Array(answer[(end + 4)...])
                    established(stream, early: early)
                case .eof, .error:
                    fail(SocketFailure(word: "proxy", message: "The proxy \(proxyName) closed the connection before answering CONNECT \(target)"))
                }
            }
        } catch {
            fail(SocketFailure(word: "io", message: "Could not read from the proxy \(proxyName): \(error)"))
        }
    }

    /// The TCP stream (or tunnel) is up: done for plain TCP, the handshake for TLS.
    private func established(_ stream: EventLoop.Stream, early: [UInt8]) {
        guard destination.tls else { return succeed(stream, early: early) }
        guard early.isEmpty else {
            return fail(SocketFailure(word: "proxy", message: "The proxy sent bytes before the TLS handshake began"))
        }
        let context: TLSContext
        do {
            context = try tlsContext()
        } catch {
            return fail(SocketFailure(word: "tls", message: "SSL: cannot make the TLS client context: \(error)"))
        }
        let elapsed = loop.now - startedAt
        let remaining = destination.timeoutMs > elapsed ? destination.timeoutMs - elapsed : 1
        do {
            let tls = try TLSStream(wrapping: stream, context: context, serverName: destination.host,
                                    verifyPeer: destination.verifyPeer, verifyHost: destination.verifyHost,
                                    handshakeTimeout: remaining) { [unowned self] error in
                guard done != nil else { return }
                guard let error else { return succeed(attempt!, early: []) }
                let text = error.operation.hasPrefix("SSL") ? error.operation : "SSL connect error: \(error.operation)"
                fail(SocketFailure(word: error.name == "ETIMEDOUT" ? "timeout" : "tls", message: text))
            }
            attempt = tls
        } catch {
            fail(SocketFailure(word: "tls", message: "SSL: cannot start TLS: \(error)"))
        }
    }

    // MARK: Ending

    private func succeed(_ stream: any ByteStream, early: [UInt8]) {
        attempt = nil
        let done = self.done
        finish()
        done?(.success((stream, early)))
    }

    private func fail(_ failure: SocketFailure) {
        guard let done else { return }
        finish()
        done(.failure(failure))
    }

    /// Stops the timer and the lookup, closes an unfinished stream.
    private func finish() {
        done = nil
        timer.close()
        lookup?.cancel()
        lookup = nil
        attempt?.close()
        attempt = nil
        candidates = []
    }

    /// `host:port`, with brackets around an IPv6 literal.
    static func endpoint(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// The index of the blank line's CR that ends an HTTP head, if it has arrived.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }
}
