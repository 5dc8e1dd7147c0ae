import EventLoop
import Foundation
import HTTPEngine
import JSONRPC
import Logging

/// Keeps each principal's persistent cookies on disk (`CookieStore`) in step with its
/// jar: loads them when the principal appears, writes them after a change — at most
/// once a second, on a loop timer, so a burst of responses costs one write — and once
/// more at a clean shutdown. Without a state directory it only clears jars.
///
/// libcurl does not say when a jar changes, so "after a change" means after a transfer
/// that used the jar ended (completed, failed or was cancelled: a redirect hop or a
/// head may have set cookies before the end). The write itself happens only when the
/// bytes to write differ from the last ones written, so a transfer that set no
/// persistent cookie costs one read of the jar and no I/O.
///
/// `clearCookies` without the persistent store (docs/guide/cookies-and-credentials.md): the jar is emptied,
/// but the persistent cookies it held are still on disk at the next start. They are
/// kept in `retained` and written with every later save (unless the jar has since
/// received a cookie with the same domain, path and name, which is newer), so a save
/// for some other change does not drop them.
///
/// Confined to the loop's thread.
final class CookiePersistence {
    private let store: CookieStore?
    private let timer: EventLoop.Timer?
    private let logger: Logger
    private var principals: [String: Principal] = [:]
    private var dirty: Set<String> = []
    private var lastWritten: [String: [UInt8]] = [:]
    private var retained: [String: [Cookie]] = [:]
    /// At most one write per principal per this many milliseconds.
    static let debounceMilliseconds: UInt64 = 1000

    /// `stateDirectory` nil: cookies live in memory only. Throws when the directory
    /// cannot be made (see `CookieStore.init`) or the loop cannot make a timer.
    init(stateDirectory: String?, loop: Loop, logger: Logger) throws {
        self.logger = logger
        if let stateDirectory {
            store = try CookieStore(directory: stateDirectory)
            timer = try EventLoop.Timer(loop: loop)
        } else {
            store = nil
            timer = nil
        }
    }

    /// Starts keeping `p`'s cookies: loads its store into its jar. A store that cannot
    /// be read is logged and ignored.
    func attach(_ p: Principal) {
        principals[p.name] = p
        guard let store else { return }
        let path = store.path(for: p.name)
        switch store.load(principal: p.name, now: Int64(time(nil))) {
        case .missing:
            break
        case .refused(let why):
            logger.warning("cookie store not loaded: \(why)")
        case .cookies(let cookies, let skipped):
            var refused = 0
            for c in cookies {
                do { try p.cookieJar.add(c) } catch { refused += 1 }
            }
            if skipped + refused > 0 {
                logger.warning("cookie store \(path): \(skipped + refused) lines are not cookies libcurl accepts and were skipped")
            }
            logger.info("loaded \(cookies.count - refused) cookies of principal \(p.name) from \(path)")
            p.countCookies()
        }
    }

    /// A transfer that used `p`'s jar ended: save within a second if anything changed.
    func jarMayHaveChanged(_ p: Principal) {
        guard store != nil, let timer else { return }
        dirty.insert(p.name)
        if !timer.isActive {
            timer.start(timeout: CookiePersistence.debounceMilliseconds) { [unowned self] in saveDirty() }
        }
    }

    /// Empties `p`'s jar; with `includingStore`, its store too, at once (a cleared
    /// store must stay cleared even if the process dies next).
    func clear(_ p: Principal, includingStore: Bool) throws(RPCError) {
        defer { p.countCookies() }
        if includingStore {
            retained[p.name] = nil
            p.cookieJar.removeAll()
            dirty.remove(p.name)
            guard store != nil else { return }
            do {
                try save(p)
            } catch {
                throw RPCError.internalError("the cookies were cleared from memory but not from the store: \(error)")
            }
        } else {
            if store != nil { retained[p.name] = persistentCookies(of: p) }
            p.cookieJar.removeAll()
        }
    }

    /// Writes every principal with unsaved changes now, and stops the timer for good.
    /// Called at shutdown, after the requests were released (their transfers ended).
    func close() {
        saveDirty()
        timer?.close()
    }

    private func saveDirty() {
        let names = dirty
        dirty = []
        for name in names.sorted() {
            guard let p = principals[name] else { continue }
            do { try save(p) } catch { logger.error("\(error)") }
        }
    }

    /// The live persistent cookies to keep for `p`: the jar's, and those cleared from
    /// memory only that the jar has not replaced since.
    private func persistentCookies(of p: Principal) -> [Cookie] {
        let now = Int64(time(nil))
        let inJar = p.cookieJar.cookies
        let identities = Set(inJar.map(\.identity))
        let kept = (retained[p.name] ?? []).filter { !identities.contains($0.identity) && !$0.isExpired(at: now) }
        return inJar.filter { !$0.isSession } + kept
    }

    private func save(_ p: Principal) throws(CookieStore.WriteError) {
        guard let store else { return }
        let bytes = CookieStore.contents(persistentCookies(of: p), principal: p.name)
        guard bytes != lastWritten[p.name] else { return }
        try store.save(bytes, principal: p.name)
        lastWritten[p.name] = bytes
    }
}
