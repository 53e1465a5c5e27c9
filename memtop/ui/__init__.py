"""The Textual UI. Renders from ``memtop.state`` via ``memtop.views``; never imports bcc."""
