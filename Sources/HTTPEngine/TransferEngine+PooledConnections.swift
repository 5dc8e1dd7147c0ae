#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl

/// A pooled HTTP/1 connection on which bytes arrived while it was idle is never used
/// again.
///
/// Nothing may come on an idle HTTP/1 connection: a response answers a request (RFC 9112
/// §9.3), so bytes that arrive unasked (an origin that answers twice, or sends a body
/// after its answer to a HEAD, or an attacker who can write to it) would be read as the
/// response of the next request sent on it — which may be another principal's, since
/// the connection cache is shared. libcurl 7.88 takes such a connection for alive
/// (`cf_socket_conn_is_alive` calls a readable socket with data alive; 8.x counts any
/// pending input as dead), so the engine looks itself, in `CURLOPT_PREREQFUNCTION`:
/// libcurl calls it once the connection for a request is chosen, reused or new, and
/// before anything is sent. A reused connection with unread bytes, or with its end of
/// input, is shut down both ways there. libcurl's send then fails (`CURLE_SEND_ERROR`)
/// and, because the connection was a reused one and nothing was received, libcurl sends
/// the request again on a fresh connection (`Curl_retry_request`) and closes the bad
/// one. The request never sees the stray bytes.
///
/// The callback names the connection by its addresses only, so every engine-opened
/// socket is filed by its local port the first time it carries a request
/// (`pooledConnections`), and found there on every reuse. HTTP/2 connections are left
/// alone: frames come on them at any time (settings, pings, other streams), and
/// nghttp2 reads them.
extension TransferEngine {
    static let prerequestCallback: curl_prereq_callback = { clientp, peerIP, _, peerPort, localPort in
        guard let clientp, let peerIP else { return Curl.prereqOK }
        let t = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
        t.engine?.connectionChosen(for: t, peerIP: peerIP, peerPort: Int(peerPort), localPort: Int(localPort))
        return Curl.prereqOK
    }

    /// `CURLOPT_PREREQFUNCTION`: files a new connection, or checks a reused one (above).
    func connectionChosen(for t: Transfer, peerIP: UnsafePointer<CChar>, peerPort: Int, localPort: Int) {
        guard let peer = IPAddress.parseLiteral(String(cString: peerIP)) else { return }
        guard let w = pooledConnection(peer: peer, peerPort: peerPort, localPort: localPort) else {
            fileNewConnection(of: t, peer: peer, peerPort: peerPort, localPort: localPort)
            return
        }
        // Watched: a new connection that connected in this turn (libcurl watched it while
        // connecting), or an HTTP/2 connection carrying other streams.
        guard !w.watching, !w.multiplexed, TransferEngine.hasInput(w.fd) else { return }
        log.notice("not reusing the connection to \(peer):\(peerPort): bytes came on it while it was idle")
        _ = Glibc.shutdown(w.fd, Int32(SHUT_RDWR))
    }

    /// The filed connection from `localPort` to `peer`:`peerPort`, if any.
    func pooledConnection(peer: IPAddress, peerPort: Int, localPort: Int) -> SocketWatch? {
        pooledConnections[localPort]?.first { $0.peer?.address == peer && $0.peer?.port == peerPort }
    }

    /// Files the socket `t` opened for this connection (one of its happy-eyeballs
    /// attempts won), found by its addresses: one `getsockname` and one `getpeername`
    /// per connection.
    private func fileNewConnection(of t: Transfer, peer: IPAddress, peerPort: Int, localPort: Int) {
        for fd in t.openedSockets {
            guard let w = watch(fd), w.openedByEngine, w.peer == nil,
                  let local = TransferEngine.endpoint(of: fd, peer: false), local.port == localPort,
                  let remote = TransferEngine.endpoint(of: fd, peer: true), remote.address == peer, remote.port == peerPort
            else { continue }
            w.peer = remote
            w.localPort = localPort
            pooledConnections[localPort, default: []].append(w)
            return
        }
    }

    /// Takes a closing socket out of `pooledConnections`.
    func unfile(_ w: SocketWatch) {
        guard w.peer != nil, var list = pooledConnections[w.localPort] else { return }
        list.removeAll { $0 === w }
        pooledConnections[w.localPort] = list.isEmpty ? nil : list
    }

    /// Whether a byte, or the end of input, waits to be read on `fd` (or the socket is
    /// in error): a one-byte peek that never blocks.
    static func hasInput(_ fd: curl_socket_t) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)
    }

    /// The local (`peer` false) or remote address of a connected socket.
    static func endpoint(of fd: curl_socket_t, peer: Bool) -> (address: IPAddress, port: Int)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { peer ? getpeername(fd, $0, &length) : getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { return nil }
        return withUnsafeBytes(of: storage) { IPAddress.endpoint(ofSockaddr: $0.baseAddress!, length: Int(length)) }
    }
}
