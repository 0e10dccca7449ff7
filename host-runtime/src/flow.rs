//! Batched flow control: the host's heads, sent to the device with one CXL.mem store whenever
//! they moved since the last one, at most once per poll. The device never waits for them:
//! its stale copies are conservative (see `firmware::flow`).

use shared_abi::FlowControlMessage;

/// What was last sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowControl {
    sent: FlowControlMessage,
    stores: u64,
}

impl FlowControl {
    /// The message to send for the current heads, if they moved since the last one.
    pub fn due(&self, metadata_head: u64, payload_head: u64) -> Option<FlowControlMessage> {
        let message = FlowControlMessage {
            metadata_head,
            payload_head,
        };
        (message != self.sent).then_some(message)
    }

    /// `message` was sent.
    pub fn sent(&mut self, message: FlowControlMessage) {
        self.sent = message;
        self.stores += 1;
    }

    /// The payload head the device was last told.
    pub fn sent_payload_head(&self) -> u64 {
        self.sent.payload_head
    }

    /// Stores sent so far.
    pub fn stores(&self) -> u64 {
        self.stores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_sent_until_a_head_moves() {
        let mut flow = FlowControl::default();
        assert_eq!(flow.due(0, 0), None);
        let message = flow.due(3, 0).unwrap();
        flow.sent(message);
        assert_eq!(flow.due(3, 0), None);
        assert!(flow.due(3, 1).is_some());
        assert_eq!(flow.stores(), 1);
    }
}
