#if canImport(Glibc)
import Glibc
#endif
import CCurl
import CShims

/// Following redirects, in the engine rather than in libcurl.
///
/// libcurl 7.88 cannot follow them the way RFC 9110 §15.4 and Fetch say: it follows
/// any 3xx with a `Location` (300, 305, 399…), and a method it sends with
/// `CURLOPT_CUSTOMREQUEST` stays on every hop while the body it came with is dropped on
/// 301/302/303 (a PUT answered with 301 went out again as a PUT with no body), or kept
/// on 303 where it must go. So `FOLLOWLOCATION` stays off, and a hop that ends with a
/// followed redirect (`RedirectRule.followedCodes`, noted by the header callback in
/// `Transfer.redirectHead`) is followed here: the same easy handle leaves the multi,
/// is reset, configured for the next hop's request (`RedirectRule.nextHop`) and added
/// again, so the connection stays in the cache for the next hop to reuse. What libcurl
/// did between hops is done here, each in one place:
/// - the hop limit (`maxRedirects`), with libcurl's error (`CURLE_TOO_MANY_REDIRECTS`);
/// - the target: the `Location` resolved against the hop's URL by libcurl's own parser
///   (`URLTarget.resolve`), refused unless http or https, and checked by the egress
///   policy before anything is sent to it (`redirectTarget`);
/// - method, body and headers, and credentials only to the caller's origin
///   (`RedirectRule`);
/// - the timeout, which is for the whole run (the engine's own clock, `TransferEngine+Pause.swift`);
/// - an upload body is rewound: `configure` opens it again for the new hop.
extension TransferEngine {
    /// Starts the hop that `redirect` (the head of the hop that just completed) leads
    /// to. Returns nil when the next hop runs, or the failure that ends the transfer.
    func followRedirect(_ t: Transfer, _ slot: EasySlot, _ redirect: ResponseHead, from url: String) -> TransferFailure? {
        guard t.redirectsFollowed < t.request.maxRedirects else {
            return TransferFailure(CURLE_TOO_MANY_REDIRECTS, "Maximum (\(t.request.maxRedirects)) redirects followed")
        }
        guard let location = redirect.followedLocation else {
            return TransferFailure(CURLE_WEIRD_SERVER_REPLY, "A redirect without a Location")
        }
        let next: (url: String, target: URLTarget)
        switch redirectTarget(location, from: url) {
        case .failure(let denial): return denial
        case .success(let resolved): next = resolved
        }
        var remaining = 0.0
        if t.request.timeout > 0 {
            remaining = t.request.timeout - t.activeClock.seconds(at: TransferEngine.monotonicSeconds())
            guard remaining > 0 else {
                return TransferFailure(CURLE_OPERATION_TIMEDOUT,
                                       "Operation timed out after \(Int(t.request.timeout * 1000)) milliseconds, while following a redirect")
            }
        }
        let sameOrigin = t.origin.map { origin in
            origin.scheme == next.target.scheme && origin.port == next.target.port
                && origin.host.lowercased() == next.target.host.lowercased()
        } ?? false
        var hop = RedirectRule.nextHop(after: redirect.status, to: next.url, previous: t.hop,
                                       original: t.request, sameOrigin: sameOrigin)
        hop.timeout = remaining

        // The finished hop leaves the multi; its connection goes back to the cache.
        let suspect = t.connectionSuspect ? cachedConnection(of: slot) : nil
        t.earlierConnections += slot.easy.info(long: CURLINFO_NUM_CONNECTS) ?? 0
        removeFromMulti(t, slot)
        if let suspect { retire(suspect) }
        t.releaseResources()
        slot.reset()
        t.startHop(hop)
        do {
            try configure(slot, for: t, isHTTPS: next.target.scheme == "https")
        } catch let failure as TransferFailure {
            return failure
        } catch {
            return TransferFailure(CURLE_FAILED_INIT, "Cannot follow the redirect: \(error)")
        }
        let rc = curl_multi_add_handle(multi.raw, slot.easy.raw)
        guard rc == CURLM_OK else {
            return TransferFailure(CURLE_FAILED_INIT, "Cannot follow the redirect: \(String(cString: curl_multi_strerror(rc)))")
        }
        t.inMulti = true
        holdIfRequested(t)
        return nil
    }

    /// The next hop's absolute URL and target, or the failure that stops the transfer:
    /// a `Location` that cannot be read (the server's fault, not the policy's: it says
    /// so), a scheme other than http and https, or a destination the egress policy
    /// refuses. The messages quote the `Location` as the server sent it, without any
    /// password.
    func redirectTarget(_ location: String, from base: String) -> Result<(url: String, target: URLTarget), TransferFailure> {
        let shown = URLRedaction.redact(location, secretNames: options.secretQueryNames)
        let reason: String
        do {
            let resolved = try URLTarget.resolve(location: location, against: base)
            let target = resolved.target
            if target.scheme != "http" && target.scheme != "https" {
                reason = "the redirect to \(shown) uses the scheme \"\(target.scheme)\"; only http and https are spoken."
            } else if let policy = options.egressPolicy,
                      case let .denied(why) = policy.checkDestination(target) {
                reason = "the redirect to \(shown) was refused: \(why)"
            } else {
                // Judged as the address it names, as at `start`; connected to there too.
                return .success(try URLTarget.addressingIPv4Literally(resolved.url, target) ?? resolved)
            }
        } catch {
            let why = (error as? TransferFailure)?.text ?? "\(error)"
            log.notice("redirect refused: its Location \(shown) cannot be read (\(why))")
            return .failure(TransferFailure(CURLE_WEIRD_SERVER_REPLY, "Invalid redirect: the Location \(shown) cannot be read (\(why))"))
        }
        log.notice("redirect refused: \(reason)")
        return .failure(options.egressPolicy == nil ? TransferFailure(CURLE_UNSUPPORTED_PROTOCOL, reason) : .egressDenied(reason))
    }

    /// Makes sure a cached connection is not used again: its reading side is shut, so
    /// libcurl's liveness check finds it dead before any reuse (why only reading: see
    /// `closeConnections(usedBy:)`). A connection libcurl is watching again, or one it
    /// already closed, is left alone.
    ///
    /// So is an HTTP/2 connection: libcurl 7.88's liveness check of an idle HTTP/2
    /// connection takes a read of end-of-file for "alive" (it only looks for frames
    /// that end the session), and it keeps the connection after a stream on it fails,
    /// so a shut one would fail every later request to that origin ("HTTP/2 stream N
    /// was not closed cleanly before end of the underlying stream";
    /// `test_real_peers.py` `H2Test.test_close_of_an_http2_connection_breaks_no_later_request`).
    /// Such a connection stays in the cache; libcurl still gives it only to transfers
    /// whose TLS settings match the ones it was opened with, so relaxed checks never
    /// carry over to a request that verifies.
    func retire(_ w: SocketWatch) {
        guard watch(w.fd) === w, w.openedByEngine, !w.watching, !w.multiplexed else { return }
        _ = Glibc.shutdown(w.fd, Int32(SHUT_RD))
    }

    /// Seconds on a clock that only goes forward, for the run's timeout and duration.
    static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1_000_000_000
    }
}

extension Transfer {
    /// Makes `hop` the request the next configure sends, and forgets what the previous
    /// hop's head and connection attempts left.
    func startHop(_ next: TransferRequest) {
        hop = next
        redirectsFollowed += 1
        redirectHead = nil
        connectionSuspect = false
        headParser = ResponseHeadParser()
        deniedAddresses = []
        allowedConnects = 0
        // A new easy configuration starts unpaused; only the caller's pause carries over
        // (`TransferEngine.holdIfRequested`).
        pauseReasons.remove(.noRoom)
        pausedInCurl = false
        roomMade = false
    }
}
