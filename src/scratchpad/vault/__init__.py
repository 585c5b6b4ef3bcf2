"""The vault: encrypted local credentials, their injection into pads, and the one scrubber."""
