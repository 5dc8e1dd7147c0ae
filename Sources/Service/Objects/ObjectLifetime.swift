import EventLoop
import JSONRPC
import Logging

/// How long objects live when nobody uses them, and the detachments that let a
/// client's objects outlive its connection: one mechanism for every kind of object
/// (`SessionObject`).
///
/// Expiry: an object that is idle (a request not in flight: UNSENT, OPENED or DONE)
/// and that no call has named for `requestTTL` seconds is released, as `release`
/// would. A busy object never expires; a request's clock restarts when it reaches
/// DONE, so a long download does not expire the moment it ends. One repeating timer
/// sweeps every principal's table (a timer per object would cost a libuv handle each);
/// it runs every quarter of the shorter TTL, at most every 5 s, so an expiry happens at
/// most that late.
///
/// Detachment: `detach` takes the calling connection's created objects out of its
/// hands, so that they survive its close, and gives a single-use token; `attach` with
/// that token, from a connection of the same principal before `detachTTL` seconds
/// pass, makes them that connection's. The objects keep running meanwhile: a transfer
/// fills the unread buffer up to its limit and pauses, as it would with a client that
/// does not read, so reading after `attach` continues at the byte where it stopped.
/// A token not used in time releases its objects.
///
/// Confined to the loop's thread.
final class ObjectLifetime {
    /// The objects one `detach` handed over, until `attach` or expiry.
    private struct Detachment {
        let principal: Principal
        /// The objects, not their handles: a handle released meanwhile may be created
        /// again by someone else, and that new object is not part of this detachment.
        let objects: [any SessionObject]
        /// The objects whose events went to the detaching connection; they go to the
        /// attaching one afterwards.
        let notifiedOpener: Set<ObjectIdentifier>
        let expiresAt: Double
    }

    private unowned let server: Server
    private let timer: EventLoop.Timer
    private let clock: ServerClock
    private let requestTTL: Double
    private let detachTTL: Double
    private var detachments: [String: Detachment] = [:]

    /// `timer` is the sweeps' timer, made by the server (so that this init cannot fail);
    /// it is closed here.
    init(server: Server, timer: EventLoop.Timer, config: ServerConfig) {
        self.server = server
        self.timer = timer
        clock = config.clock
        requestTTL = config.requestTTL
        detachTTL = config.detachTTL
    }

    var now: Double { clock.now() }

    /// Starts the sweeps; `close` stops them for good.
    func start() {
        let seconds = min(min(requestTTL, detachTTL) / 4, 5)
        let interval = max(UInt64(seconds * 1000), 10)
        timer.start(timeout: interval, repeat: interval) { [unowned self] in sweep() }
    }

    /// Stops the sweeps and forgets the detachments (their requests are released with
    /// every other at shutdown).
    func close() {
        timer.close()
        detachments = [:]
    }

    /// Releases what has expired: detachments not attached in time, with their
    /// requests, and requests unused for the TTL.
    func sweep() {
        let now = now
        for (token, d) in detachments where now >= d.expiresAt {
            detachments[token] = nil
            for o in d.objects where isStillDetached(o, from: d) {
                server.logger.debug("detached \(o.kind) \(o.handle) of principal \(d.principal.name) was not attached in time; released")
                server.release(o)
            }
        }
        for p in server.principals.values {
            for o in p.objects.values where o.isIdle && now - o.lastUsed >= requestTTL {
                server.logger.debug("\(o.kind) \(o.handle) of principal \(p.name) unused for \(requestTTL) s; released")
                server.release(o)
            }
        }
    }

    /// Whether `o`, handed over by `d`, is still in its principal's table and owned by
    /// no connection.
    private func isStillDetached(_ o: any SessionObject, from d: Detachment) -> Bool {
        d.principal.objects[o.handle] === o && o.creator == nil
    }

    /// Hands `session`'s created objects to a new detachment; returns its token and
    /// the handles. Objects the session creates later are not part of it.
    /// Outstanding detachments count against the principal's request limit, so that
    /// a loop of `detach` calls cannot grow the table without bound.
    func detach(_ session: ClientSession) throws(RPCError) -> (token: String, handles: [String]) {
        let p = session.principal
        try p.check("detachments", current: detachments.values.count { $0.principal === p }, max: p.limits.requests,
                    "Too many detachments waiting to be attached")
        var objects: [any SessionObject] = []
        var notifiedOpener: Set<ObjectIdentifier> = []
        for handle in session.createdObjects.sorted() {
            guard let o = p.objects[handle] else { continue }
            o.creator = nil
            if o.opener === session { notifiedOpener.insert(ObjectIdentifier(o)) }
            o.touch()
            objects.append(o)
        }
        session.createdObjects = []
        let token = ObjectName.generate(prefix: "att_") { detachments[$0] != nil }
        detachments[token] = Detachment(principal: p, objects: objects, notifiedOpener: notifiedOpener,
                                        expiresAt: now + detachTTL)
        return (token, objects.map(\.handle))
    }

    /// Makes the objects of the detachment `token` created by `session` (and opened by
    /// it, where the detaching connection was their opener). The token works once, for
    /// the principal that made it, before it expires; every other case is the same
    /// `unknown_handle`, so that an answer tells nothing about other principals' tokens.
    func attach(_ token: String, to session: ClientSession) throws(RPCError) -> [String] {
        guard let d = detachments[token], d.principal === session.principal, now < d.expiresAt else {
            throw ServiceError.unknownDetachment
        }
        detachments[token] = nil
        var handles: [String] = []
        for o in d.objects where isStillDetached(o, from: d) {
            o.creator = session
            session.createdObjects.insert(o.handle)
            if d.notifiedOpener.contains(ObjectIdentifier(o)) { o.opener = session }
            o.touch()
            handles.append(o.handle)
        }
        return handles
    }
}
