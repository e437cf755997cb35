// The baseline: an empty Worker that answers each message with itself.
self.onmessage = (e) => self.postMessage(e.data);
