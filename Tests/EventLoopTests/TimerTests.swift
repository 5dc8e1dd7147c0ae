import Testing
@testable import EventLoop

@Test func timerFiresAndLoopClosesClean() throws {
    let loop = try Loop()
    let timer = try Timer(loop: loop)
    var fired = 0
    timer.start(timeout: 0) {
        fired += 1
        timer.close()
    }
    loop.run()
    #expect(fired == 1)
    #expect(loop.handleNames().isEmpty)
    try loop.close()
}
