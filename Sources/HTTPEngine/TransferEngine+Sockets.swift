#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl
import EventLoop

/// What the engine knows about one descriptor libcurl uses.
///
/// `poll` is made the first time libcurl asks to watch the descriptor and closed when
/// the descriptor really closes, which the engine learns from
/// `CURLOPT_CLOSESOCKETFUNCTION` for the sockets it opened itself in
/// `CURLOPT_OPENSOCKETFUNCTION` (`openedByEngine`). Descriptors libcurl made some other
/// way (the threaded resolver's wake-up pipe) give no such notice, so their poll is
/// closed on `CURL_POLL_REMOVE`, as multi-uv.c does.
///
/// In between, the poll of an engine-opened socket is disarmed lazily. libcurl 7.88
/// takes a keep-alive socket off its watch list (`CURL_POLL_REMOVE`) after every
/// transfer that leaves it idle and puts it back, with the same events, for the next
/// one; stopping the poll there and starting it again costs three `epoll_ctl` calls
/// each time (libuv 1.44's `uv_poll_start` deletes the descriptor before adding it
/// back, which fails with ENOENT after a stop). So on `CURL_POLL_REMOVE` the poll stays armed and only
/// `watching` turns false; when libcurl asks again for the events the poll is armed
/// with, nothing needs doing. If the descriptor becomes ready while libcurl is not
/// watching it — the server closed an idle pooled connection, or data arrived for a
/// paused transfer — the poll is stopped then (`socketReady`): epoll is
/// level-triggered, so an armed poll on a closed socket would wake the loop forever.
/// libcurl finds the dead connection itself before reusing it, and asks again to
/// watch a paused transfer's socket when it unpauses.
final class SocketWatch {
    let fd: curl_socket_t
    let openedByEngine: Bool
    var poll: Poll?
    /// The events libcurl asked for last.
    var events: PollEvents = []
    /// Whether libcurl currently wants events on it (false while idle in the cache, and
    /// while the transfer on it is paused).
    var watching = false
    /// Whether `poll` is started, and with which events. While `watching` they are
    /// libcurl's `events`; otherwise the poll may still be armed with the last ones
    /// (lazy disarm, above).
    var armed = false
    var armedEvents: PollEvents = []
    /// How many times the poll was started (`uv_poll_start`): tests read it to see that
    /// a reused connection costs no restart.
    var starts = 0
    /// The easy handle libcurl named the last time it asked to watch the descriptor:
    /// the transfer that used the connection most recently.
    var lastUser: UnsafeMutableRawPointer?
    /// It speaks HTTP/2: `retire` leaves it alone (see there).
    var multiplexed = false
    /// The poll's callback, made once per descriptor and reused on every restart.
    let ready: (Int32, PollEvents) -> Void
    /// The `CURL_CSELECT_*` flags of readiness held for a later turn; 0 when the socket
    /// is not in the engine's `readyQueue` (`TransferEngine+Readiness.swift`).
    var queuedFlags: Int32 = 0
    /// For a socket the engine opened, its inode: which socket the number stands for
    /// (`forgetSocketsClosedUnannounced`).
    var inode: ino_t = 0
    /// The addresses of an engine-opened socket's connection, from the first request it
    /// carried on: how `CURLOPT_PREREQFUNCTION` finds it (`pooledConnections`).
    var peer: (address: IPAddress, port: Int)?
    var localPort = 0

    init(fd: curl_socket_t, openedByEngine: Bool, ready: @escaping (Int32, PollEvents) -> Void) {
        self.fd = fd
        self.openedByEngine = openedByEngine
        self.ready = ready
    }
}

extension TransferEngine {
    // MARK: libcurl's multi callbacks (user pointer: the engine, unretained; the engine
    // outlives the multi, which `shutdown` cleans up)

    static let socketCallback: curl_socket_callback = { easy, fd, what, userp, _ in
        guard let userp else { return -1 }
        Unmanaged<TransferEngine>.fromOpaque(userp).takeUnretainedValue().curlWantsSocket(fd, what, easy)
        return 0
    }

    static let timerCallback: curl_multi_timer_callback = { _, timeoutMs, userp in
        guard let userp else { return -1 }
        Unmanaged<TransferEngine>.fromOpaque(userp).takeUnretainedValue().curlWantsTimer(timeoutMs)
        return 0
    }

    // MARK: libcurl's per-connection socket callbacks
    //
    // The open-socket callback's user pointer is the transfer opening the connection
    // (unretained; the engine's `active` table holds it while its easy handle is in the
    // multi, and only a handle in the multi connects), so the egress policy's address
    // check can record its refusals on that transfer. The close-socket callback's is
    // the engine, as above: a cached connection closes after its transfer is gone.

    static let openSocketCallback: curl_opensocket_callback = { clientp, _, address in
        guard let clientp, let address else { return CURL_SOCKET_BAD }
        let t = Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue()
        guard let engine = t.engine else { return CURL_SOCKET_BAD }
        return engine.openSocket(address, for: t)
    }

    static let closeSocketCallback: curl_closesocket_callback = { clientp, fd in
        guard let clientp else { return close(fd) }
        return Unmanaged<TransferEngine>.fromOpaque(clientp).takeUnretainedValue().closeSocket(fd)
    }

    /// `CURLMOPT_TIMERFUNCTION`: -1 stops the timer, anything else (re)arms it. A 0 ms
    /// timeout fires on the next turn: `socket_action` must not run inside this callback.
    func curlWantsTimer(_ timeoutMs: Int) {
        if timeoutMs < 0 {
            curlTimer.stop()
        } else {
            curlTimer.start(timeout: UInt64(timeoutMs), curlTimerFired)
        }
    }

    /// `CURLMOPT_SOCKETFUNCTION`: start, change or stop watching a descriptor. For an
    /// engine-opened socket, `CURL_POLL_REMOVE` leaves the poll armed (see
    /// `SocketWatch`), and a request for the events it is armed with costs nothing.
    func curlWantsSocket(_ fd: curl_socket_t, _ what: Int32, _ easy: UnsafeMutableRawPointer?) {
        guard fd >= 0 else { return }
        if what == Curl.pollRemove {
            guard let w = watch(fd) else { return }
            if w.openedByEngine, w.watching { unwatchedSockets += 1 }
            w.watching = false
            if !w.openedByEngine { closeWatch(fd: fd) }
            return
        }
        var events: PollEvents = []
        if what & Curl.pollIn != 0 { events.insert(.readable) }
        if what & Curl.pollOut != 0 { events.insert(.writable) }
        let w = watch(fd) ?? setWatch(fd, openedByEngine: false)
        if w.openedByEngine, !w.watching { unwatchedSockets -= 1 }
        w.events = events
        w.watching = true
        w.lastUser = easy
        if w.armed && w.armedEvents == events { return }
        do {
            if w.poll == nil {
                w.poll = try Poll(loop: loop, socket: fd)
                handles.opened()
            }
            w.armed = false
            w.starts += 1
            try w.poll?.start(events, w.ready)
            w.armed = true
            w.armedEvents = events
        } catch {
            // libcurl waits for an event that will never come: tell it the socket failed,
            // on the next turn (not from inside its own callback).
            log.error("cannot watch socket \(fd): \(error)")
            pendingSocketErrors.append(fd)
            armDeferred()
        }
    }

    /// `CURLOPT_OPENSOCKETFUNCTION`: checks the address against the egress policy
    /// (`admitConnection`; a refusal returns `CURL_SOCKET_BAD`, and libcurl tries the
    /// name's next address), makes the socket libcurl asked for, and notes that the
    /// engine will hear when it closes. A descriptor number still in the table belongs
    /// to a socket that closed behind our back; its poll is stale and is closed, so the
    /// new socket gets a fresh one.
    ///
    /// `address` is libcurl's pointer, not a copy: the address behind it may be longer
    /// than the declared `struct sockaddr` (see `IPAddress.endpoint(ofCurlAddress:)`).
    func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>, for t: Transfer) -> curl_socket_t {
        guard admitConnection(to: address, for: t) else { return CURL_SOCKET_BAD }
        let a = address.pointee
        #if canImport(Glibc)
        let type = a.socktype | Int32(SOCK_CLOEXEC.rawValue)
        #else
        let type = a.socktype
        #endif
        let fd = socket(a.family, type, a.protocol)
        guard fd >= 0 else { return CURL_SOCKET_BAD }
        if watch(fd) != nil { closeWatch(fd: fd) }
        setWatch(fd, openedByEngine: true).inode = TransferEngine.inode(of: fd) ?? 0
        t.openedSockets.append(fd)
        return fd
    }

    /// libcurl 7.88 closes a socket that is still connecting (one not yet its
    /// connection's, as a happy-eyeballs attempt is) with a plain `close`: no
    /// close-socket callback, no `CURL_POLL_REMOVE`. A transfer taken out of the multi
    /// while connecting leaves its socket's poll behind, and when that poll was started
    /// in the same turn libuv then registers a closed descriptor with epoll and aborts
    /// the process (`EBADF`; a client that went with fetches connecting did it). So when
    /// a transfer leaves the multi its sockets are checked, and the poll of any whose
    /// number no longer stands for the socket opened (closed, or taken since by another
    /// thread's socket: the inodes differ) is closed. A number libcurl itself reused has
    /// a new watch, with the new socket's inode (`openSocket`).
    func forgetSocketsClosedUnannounced(by t: Transfer) {
        for fd in t.openedSockets {
            guard let w = watch(fd), w.openedByEngine, TransferEngine.inode(of: fd) != w.inode else { continue }
            closeWatch(fd: fd)
        }
        t.openedSockets.removeAll()
    }

    /// The inode of the file `fd` stands for; nil when the number is not open.
    static func inode(of fd: curl_socket_t) -> ino_t? {
        var s = stat()
        return fstat(fd, &s) == 0 ? s.st_ino : nil
    }

    /// `CURLOPT_CLOSESOCKETFUNCTION`: the descriptor really closes. The poll is closed
    /// first — libuv must stop watching before the number can be reused — then the
    /// socket.
    func closeSocket(_ fd: curl_socket_t) -> Int32 {
        closeWatch(fd: fd)
        return close(fd)
    }

    /// Readiness from libuv, passed on to libcurl — or, when libcurl is not watching the
    /// descriptor (the poll was left armed by a lazy disarm), the moment to stop the
    /// poll: nobody wants these events, and a level-triggered poll on a socket the
    /// server closed would fire on every turn. libcurl needs no word of it: it checks a
    /// cached connection before reusing it, and asks again for a paused transfer's
    /// socket when the transfer resumes.
    ///
    /// A negative status means the descriptor is in error (libuv saw `EPOLLERR`, e.g. a
    /// reset) and libuv has stopped the poll. libcurl gets `CURL_CSELECT_ERR` together
    /// with the directions it was waiting for: with `ERR` alone libcurl 7.88 fails with
    /// the uninformative "select/poll returned error", while with the directions it
    /// reads the socket and reports the real cause ("Recv failure: Connection reset by
    /// peer"). If libcurl still wants the descriptor afterwards, the poll is restarted,
    /// since libcurl will not ask again for what it believes is still being watched.
    func socketReady(_ fd: curl_socket_t, _ status: Int32, _ events: PollEvents) {
        guard let w = watch(fd) else { return }
        if status < 0 { w.armed = false }
        guard w.watching else {
            if w.armed {
                w.armed = false
                w.poll?.stop()
            }
            return
        }
        guard status < 0 else {
            var flags: Int32 = 0
            if events.contains(.readable) { flags |= Curl.selectIn }
            if events.contains(.writable) { flags |= Curl.selectOut }
            passReadiness(w, flags)
            return
        }
        var flags = Curl.selectErr
        if w.events.contains(.readable) { flags |= Curl.selectIn }
        if w.events.contains(.writable) { flags |= Curl.selectOut }
        socketAction(fd, flags)
        rearm(w)
    }

    /// Starts `w`'s poll again with the events libcurl last asked for, when libcurl still
    /// wants the descriptor but the poll is stopped (libuv stopped it on an error, or the
    /// readiness was held for a later turn): libcurl will not ask again for what it
    /// believes is still being watched.
    func rearm(_ w: SocketWatch) {
        guard watch(w.fd) === w, w.watching, !w.armed, let poll = w.poll else { return }
        do {
            w.starts += 1
            try poll.start(w.events, w.ready)
            w.armed = true
            w.armedEvents = w.events
        } catch {
            log.error("cannot watch socket \(w.fd) again: \(error)")
        }
    }

    // MARK: the table

    func watch(_ fd: curl_socket_t) -> SocketWatch? {
        Int(fd) < watches.count ? watches[Int(fd)] : nil
    }

    @discardableResult
    func setWatch(_ fd: curl_socket_t, openedByEngine: Bool) -> SocketWatch {
        let i = Int(fd)
        if i >= watches.count { watches.append(contentsOf: repeatElement(nil, count: i + 1 - watches.count)) }
        let w = SocketWatch(fd: fd, openedByEngine: openedByEngine) { [unowned self] status, events in
            self.socketReady(fd, status, events)
        }
        watches[i] = w
        if openedByEngine { unwatchedSockets += 1 }
        return w
    }

    /// Forgets a descriptor and closes its poll (the poll's memory goes in its close
    /// callback, a turn later; `handles` counts it until then).
    func closeWatch(fd: curl_socket_t) {
        guard let w = watch(fd) else { return }
        watches[Int(fd)] = nil
        if w.openedByEngine, !w.watching { unwatchedSockets -= 1 }
        unfile(w)
        if let poll = w.poll {
            w.poll = nil
            poll.close(handles.closedCallback)
        }
    }
}
