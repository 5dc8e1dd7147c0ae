import CCurl

/// How large a receive buffer a transfer gets: the running transfers share one budget.
///
/// libcurl reads each transfer's response into a buffer of its own, `CURLOPT_BUFFERSIZE`
/// bytes (16 KiB by default), allocated when the transfer connects and freed when it
/// ends (`multi_done`). A transfer receiving a body fills all of it; one waiting for its
/// response still holds about a page of it. With 10,000 transfers in flight that is
/// 160 MiB of buffers once bodies flow, and about 4 KiB a transfer while they wait
/// (`docs/internals/benchmark-history.md`, "Memory per request in flight").
///
/// So the transfers share `EngineOptions.receiveBufferBudget` (4 MiB, 256 full buffers): one joining
/// while n others run gets budget / (n + 1), at most libcurl's default 16 KiB and at
/// least its minimum 1 KiB. Up to 256 in flight each has 16 KiB as before; then 4 KiB
/// at 1,024 in flight, and 1 KiB from 4,096. The price is more reads per body byte for
/// those transfers (1 KiB reads cost about 20% more CPU per byte than 16 KiB on a large
/// body, `bigbody`), paid only while thousands share the process. The size is decided
/// when the transfer joins and kept to its end: libcurl refuses a new size while the
/// buffer exists, and `curl_easy_reset` puts a pooled handle back to the default.
extension TransferEngine {
    static let fullReceiveBuffer = 16 << 10
    static let smallestReceiveBuffer = 1 << 10

    func receiveBufferBytes(joining t: Transfer) -> Int {
        let share = max(0, options.receiveBufferBudget) / (transfersRunning(besides: t) + 1)
        return min(Self.fullReceiveBuffer, max(Self.smallestReceiveBuffer, share))
    }
}
