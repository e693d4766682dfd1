'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { slugify } = require('../src/slug.js');

test('no trailing dash after punctuation', () => {
  assert.strictEqual(slugify('Ready, set, go!'), 'ready-set-go');
});

test('no leading dash', () => {
  assert.strictEqual(slugify('  spaced out  '), 'spaced-out');
});

test('runs collapse to one dash', () => {
  assert.strictEqual(slugify('a -- b'), 'a-b');
});

test('digits survive', () => {
  assert.strictEqual(slugify('Top 10 Tips'), 'top-10-tips');
});
