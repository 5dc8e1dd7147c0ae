import Testing
@testable import EventLoop
import TestSupport

/// The write-side buffer keeps bytes in order across growth, keeps a small allocation
/// for reuse when emptied, and gives a large one back.
@Test func outboundBufferAppendsAndReleases() {
    var buffer = OutboundBuffer()
    #expect(buffer.isEmpty)
    let bytes = patternBytes(200_000)
    var offset = 0
    var step = 1
    while offset < bytes.count {
        let end = min(offset + step, bytes.count)
        bytes.withUnsafeBytes { buffer.append(UnsafeRawBufferPointer(rebasing: $0[offset..<end])) }
        offset = end
        step = step * 3 + 1
    }
    #expect(buffer.count == bytes.count)
    let copy = Array(UnsafeRawBufferPointer(start: buffer.base, count: buffer.count))
    #expect(copy == bytes)

    buffer.removeAll()  // 256 KiB capacity is above the retained size: freed
    #expect(buffer.isEmpty)
    #expect(buffer.base == nil)

    buffer.append(UnsafeRawBufferPointer(start: nil, count: 0))
    #expect(buffer.base == nil)
    [UInt8](repeating: 7, count: 100).withUnsafeBytes { buffer.append($0) }
    let small = buffer.base
    buffer.removeAll()  // small: kept for reuse
    #expect(buffer.base == small && small != nil)
    buffer.release()
    #expect(buffer.base == nil && buffer.count == 0)
}
