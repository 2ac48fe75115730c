import Deferred
import Dispatch
import TestSupport
import Testing

@Suite struct FutureAndTests {
    @Test func andJoinsFuturesOfDifferentTypesIntoATuple() {
        let number = Deferred<Int>()
        let word = Deferred<String>()
        let flag = Future(filledWith: true)
        let joined = number.and(word, flag)
        word.fill(with: "two")
        #expect(joined.peek() == nil)
        number.fill(with: 1)
        let value = joined.peek()
        #expect(value?.0 == 1)
        #expect(value?.1 == "two")
        #expect(value?.2 == true)
    }

    @Test func andJoinsAnyNumberOfFutures() {
        let parts = (0..<6).map { _ in Deferred<Int>() }
        let joined = parts[0].and(parts[1], parts[2], parts[3], parts[4], parts[5].lazy.map { "\($0)" })
        for (index, part) in parts.enumerated().reversed() {
            #expect(joined.peek() == nil)
            part.fill(with: index)
        }
        let value = joined.peek()
        #expect(value?.0 == 0)
        #expect(value?.4 == 4)
        #expect(value?.5 == "5")
    }

    @Test func andWithOneOtherMakesAPair() {
        let joined = Future(filledWith: 1).and(Future(filledWith: "one"))
        #expect(joined.peek()?.0 == 1)
        #expect(joined.peek()?.1 == "one")
    }

    @Test func andIsFilledFromWhicheverThreadFillsLast() {
        let left = Deferred<Int>()
        let right = Deferred<Int>()
        let joined = left.and(right)
        DispatchQueue.global().async { left.fill(with: 1) }
        DispatchQueue.global().async { right.fill(with: 2) }
        let value = joined.value()
        #expect(value?.0 == 1)
        #expect(value?.1 == 2)
    }
}
