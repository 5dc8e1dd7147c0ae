import CCurl
import CShims  // CURLINFO_* resolve through it in release (whole-module) builds

/// Where the engine applies the egress policy (`EngineOptions.egressPolicy`;
/// docs/security/egress.md), in one place. The policy itself is a pure value (`EgressPolicy`); this is when
/// and on what it is asked, and how its answer ends a transfer.
///
/// 1. At `start`, on the request URL's target as libcurl reads it (`URLTarget`):
///    `EgressPolicy.checkDestination`. A refused transfer is never handed to libcurl; it
///    completes on the next turn with the denial, like any other failure (delegates are
///    never called from inside `start`).
/// 2. In the open-socket callback, on every address libcurl is about to connect to —
///    the request's host, each redirect hop's, or the proxy's when one is used:
///    `EgressPolicy.checkAddress`. A refusal returns `CURL_SOCKET_BAD`, which makes
///    libcurl try the name's next address (happy eyeballs included), so a name with one
///    allowed and one denied address still works through the allowed one. Checking
///    here, not after our own DNS lookup, is what defeats DNS rebinding: the address
///    checked is the one connected to.
/// 3. On every redirect hop, before the engine follows it
///    (`TransferEngine+Redirects.swift`): the `Location` is resolved against the hop's
///    URL with libcurl's own parser (`URLTarget.resolve`) and check 1 runs on the
///    result before the next hop is configured. Only `http` and `https` targets pass,
///    and a `Location` that cannot be parsed is refused too: what cannot be read
///    cannot be checked.
///
/// Every denial ends the transfer with `TransferFailure.egressDenied`, whose text
/// begins `Denied by egress policy: ` and names what was denied and why.
extension TransferEngine {
    /// Check 1 on the request URL's target; nil when there is no policy or it allows.
    func startDenial(_ target: URLTarget) -> TransferFailure? {
        guard let policy = options.egressPolicy else { return nil }
        guard case let .denied(reason) = policy.checkDestination(target) else { return nil }
        log.notice("egress denied: \(reason)")
        return .egressDenied(reason)
    }

    /// Takes a transfer the policy refused at `start` as if it ran, so that `cancel`
    /// and `shutdown` treat it like any other, and completes it on the next turn.
    func deny(_ t: Transfer, _ denial: TransferFailure) {
        t.denial = denial
        t.engine = self
        t.state = .running
        active.insert(t)
        pendingDenials.append(t)
        armDeferred()
    }

    /// Completes a transfer refused at `start`, unless it was cancelled meanwhile.
    func completeDenied(_ t: Transfer) {
        guard t.state == .running else { return }
        t.metrics = TransferMetrics(effectiveURL: t.hop.url, redirectCount: 0, connectionsOpened: 0, totalTime: 0)
        t.state = .finished
        detach(t)
        t.delegate?.transfer(t, completedWith: t.denial)
    }

    /// Check 2, from the open-socket callback: whether `t` may connect to `address`.
    /// A refusal is recorded on the transfer, which reports it if no other address
    /// gets through (`egressFailure`). An address the policy cannot read (a family
    /// other than IPv4 and IPv6) is refused: it cannot be checked.
    func admitConnection(to address: UnsafeMutablePointer<curl_sockaddr>, for t: Transfer) -> Bool {
        guard let policy = options.egressPolicy else { return true }
        guard let endpoint = IPAddress.endpoint(ofCurlAddress: address) else {
            let reason = "an address of family \(address.pointee.family), which the policy cannot check."
            t.deniedAddresses.append(reason)
            log.notice("egress denied: \(reason)")
            return false
        }
        if case let .denied(reason) = policy.checkAddress(endpoint.address, port: endpoint.port) {
            t.deniedAddresses.append(reason)
            log.notice("egress denied: \(reason)")
            return false
        }
        t.allowedConnects += 1
        return true
    }

    /// The failure to report instead of libcurl's when the policy caused it: the denial
    /// at `start`, or, when
    /// every address libcurl tried was refused, those refusals (libcurl saw only sockets
    /// that could not be made). nil leaves libcurl's own failure.
    /// `url` is the transfer's effective URL, the last hop's.
    func egressFailure(of t: Transfer, at url: String) -> TransferFailure? {
        if let denial = t.denial { return denial }
        guard !t.deniedAddresses.isEmpty, t.allowedConnects == 0 else { return nil }
        let place = (try? URLTarget.parse(url: url)).map { "\($0.host):\($0.port)" } ?? url
        return .egressDenied("every address tried for \(place) is denied: " + t.deniedAddresses.joined(separator: " "))
    }
}
